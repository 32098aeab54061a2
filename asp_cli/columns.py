"""Shared vocabulary: the column names asp looks for in user files and the ones it writes.

Every module that detects or writes a column takes its name from here, so the detection order is documented
in one place (README, "Input files").
"""

from __future__ import annotations

# Where a prompt lives, in the order asp looks. A column holding a chat-message list (verl's `prompt`,
# OpenAI-style `messages`) wins over plain text; `messages` may also be a JSON string of such a list
# (the RollPacker prompt files store it that way).
PROMPT_KEYS: tuple[str, ...] = ("prompt", "messages", "question", "problem", "instruction", "input")

# Where a prompt id lives; without one, the row number (0-based, inputs concatenated) is the id.
ID_KEYS: tuple[str, ...] = (
    "id",
    "prompt_id",
    "uid",
    "unique_id",
    "question_id",
    "instruction_id",
    "problem_id",
    "index",
)

# Where an observed response length lives in history, rollout logs and length files.
LENGTH_KEYS: tuple[str, ...] = (
    "response_tokens",
    "response_length",
    "completion_tokens",
    "num_tokens",
    "output_tokens",
    "generated_tokens",
    "length",
)

# Optional metadata the predictor uses as categorical features.
# `datasource`: OpenRLHF's PromptDataset's name (a newcomer's OpenRLHF dataset got "(no source)" in its probe).
SOURCE_KEYS: tuple[str, ...] = ("data_source", "source", "datasource", "dataset", "domain", "subject", "platform")
DIFFICULTY_KEYS: tuple[str, ...] = ("difficulty", "level")
# A prompt's reference answer, which OpenRLHF's --data.label_key and slime's --label-key hand the reward function
# (a top-level field: `data[label_key]`), in the order `asp export` names it in their settings; a nested one, as
# verl's reward_model.ground_truth, is none of these (an OpenRLHF newcomer's `answer` was told LABEL).
LABEL_KEYS: tuple[str, ...] = ("answer", "ground_truth", "label", "solution")

# Columns of the prompt frame that `reading.read_prompts` returns.
ROW = "row"
PROMPT_ID = "prompt_id"
PROMPT_TEXT = "prompt_text"
N_MESSAGES = "n_messages"
DATA_SOURCE = "data_source"
DIFFICULTY = "difficulty"

# Columns of the history frame that `reading.read_history` returns (one row per observed sample).
RESPONSE_TOKENS = "response_tokens"
# The largest token count (response or prediction) asp accepts in a file: no model generates more, and
# sums over millions of such counts stay far inside int64.
MAX_TOKEN_COUNT = 2**31 - 1
TRUNCATED = "truncated"
# A length file's column numbering each prompt's samples (0..n-1): asp's probe scripts and emulated rollouts
# write `sample`; a row repeating a prompt id, epoch and sample is the same sample logged twice.
SAMPLE_KEYS: tuple[str, ...] = ("sample", "sample_index", "sample_idx")
EPOCH = "epoch"

# Prediction columns (one row per prompt) that predictors and history produce.
PREDICTED_TOKENS = "predicted_tokens"
PREDICTED_MAX_TOKENS = "predicted_max_tokens"
PREDICTED_MEAN_TOKENS = "predicted_mean_tokens"
PROMPT_TOKENS = "prompt_tokens"
PREDICTION_SOURCE = "prediction_source"  # "history" | "model"
