"""Docs coverage: every command has help text and a place in the README (the sqlite-utils habit)."""

import re

from typer.testing import CliRunner

from asp_cli.cli.main import app

from util import REPO

runner = CliRunner()


def _commands():
    names = [c.name for c in app.registered_commands]
    groups = [g.name for g in app.registered_groups]
    return names, groups


def test_every_command_has_help_and_a_readme_mention():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    names, groups = _commands()
    assert {"schedule", "simulate", "bench", "report", "export", "observe"} <= set(names)
    assert "predictor" in groups
    for name in names + groups:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Usage:" in result.stdout
        assert re.search(rf"\basp {name}\b", readme), f"README does not show `asp {name}`"
    for sub in ("fit", "eval", "predict", "info"):
        assert runner.invoke(app, ["predictor", sub, "--help"]).exit_code == 0
        assert f"asp predictor {sub}" in readme


def test_docs_the_readme_links_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]+)\)", readme):
        assert (REPO / target).exists(), target


def test_every_command_has_a_python_twin_in_asp_cli_and_in_the_architecture_doc():
    import asp_cli

    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    twins = ("schedule", "report_schedule", "simulate_file", "run_benchmark", "export", "observe", "probe",
             "fit_predictor",
             "evaluate_predictor", "predict_file", "predictor_info", "replay_schedule", "calibrate")
    for name in twins:
        assert name in asp_cli.__all__ and callable(getattr(asp_cli, name)), name
        assert name in doc, f"docs/architecture.md does not name the twin {name}"
    # Listed though loaded lazily (a newcomer's dir(asp_cli) showed none), and every re-export resolves, the
    # settings docs/report.md names among them.
    assert set(asp_cli.__all__) <= set(dir(asp_cli))
    for name in asp_cli.__all__:
        assert getattr(asp_cli, name) is not None, name
    assert asp_cli.CheckLimits.__name__ == "CheckLimits" and "asp_cli.CheckLimits(" in \
        (REPO / "docs" / "report.md").read_text(encoding="utf-8")
    # What a type checker sees (the TYPE_CHECKING imports) is every re-export, from where it is loaded: names
    # imported from `asp_cli` typed as Any for a Python user's mypy.
    import ast

    tree = ast.parse((REPO / "asp_cli" / "__init__.py").read_text(encoding="utf-8"))
    typed = {alias.name: node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module and node.module.startswith("asp_cli.") for alias in node.names}
    assert typed == asp_cli._TWINS
    assert (REPO / "asp_cli" / "py.typed").is_file()


def test_the_readme_gate_passes_on_the_readme_data(tmp_path, monkeypatch):
    """The README's `--check` example, run as written on the bundled sample data, passes (exit 0)."""
    import shlex

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line.split("  #")[0].strip() for line in readme.splitlines() if "gated.parquet" in line]
    assert len(lines) == 2 and lines[0].startswith("asp schedule") and "--check" in lines[1]
    monkeypatch.chdir(REPO)
    for line in lines:
        args = [a.replace("gated.parquet", str(tmp_path / "gated.parquet")) for a in shlex.split(line)[1:]]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (line, result.output)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.M):
        text = re.sub(r"[`*_]", "", heading.strip().lower())
        anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


def test_every_relative_link_in_the_readme_and_docs_resolves_inside_the_repository():
    # docs/simulation.md and docs/algorithms.md once pointed at ../shared/docs, which no clone has.
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared/docs" not in text, f"{page.name} points outside the repository (../shared/docs)"
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#") and not target[1:]:
                continue  # a URL
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.is_relative_to(REPO), f"{page.name}: {target} leaves the repository"
            assert resolved.exists(), f"{page.name}: {target} does not exist"
            if anchor and resolved.suffix == ".md":
                assert anchor in _anchors(resolved.read_text(encoding="utf-8")), f"{page.name}: {target}: no such heading"
            checked += 1
    assert checked > 20


def test_the_benchmark_scripts_prose_is_the_documents():
    """The scripts that rewrite a section of docs/benchmarks.md carry that section's prose (the findings around
    their tables): it must be the document's own, or rerunning a reproduction command would put back stale text."""
    import importlib.util
    import sys

    sys.path.insert(0, str(REPO / "scripts"))  # the scripts import each other by name, as when run
    doc = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for script, names in (("bench_simulate", ("INTRO", "FINDINGS", "OTHER_ENGINES")),
                          ("bench_held_out", ("INTRO", "FINDINGS")), ("bench_choice_regret", ("FINDINGS",)),
                          ("bench_expectation", ("FINDINGS",))):
        spec = importlib.util.spec_from_file_location(script, REPO / "scripts" / f"{script}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in names:
            assert getattr(module, name).strip() in doc, f"scripts/{script}.py's {name} differs from docs/benchmarks.md"



def test_the_integrations_doc_says_how_to_follow_its_commands_on_the_sample_data():
    """Its OpenRLHF and slime commands read `prompts.jsonl`, which the repository root does not hold: a newcomer
    following them on the sample data got "prompts.jsonl: no such file" (docs/pipelines.md says to copy it; this doc
    did not)."""
    doc = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    first_use = doc.index("asp schedule prompts.jsonl")
    assert not (REPO / "prompts.jsonl").exists()
    assert 0 <= doc.find("cp sample_data/prompts.jsonl prompts.jsonl") < first_use


def _shell_commands(doc: str) -> list[str]:
    """The commands of a page's shell blocks, in order, continuation lines joined and trailing comments cut."""
    import re

    commands, lines, fence, shell = [], doc.splitlines(), False, False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            fence = not fence
            shell = fence and line.strip() in ("```bash", "```sh", "```")
        elif shell:
            while line.rstrip().endswith("\\") and not lines[i + 1].startswith("```"):
                i += 1
                line = line.rstrip()[:-1] + " " + lines[i].strip()
            commands.append(line if line.startswith("python -c") else re.sub(r"\s+#.*$", "", line))
        i += 1
    return commands


def test_the_integrations_docs_commands_read_only_files_made_before_them():
    """Run in order from the repository root, every asp command of docs/integrations.md reads files the page made
    before it (or the sample data), and one that writes a file an earlier command made says --force: Option A
    exported `schedule.parquet prompts.parquet`, neither of which the page had made (a newcomer got "no such file"),
    and the later sections' schedules stopped on the earlier ones' (exit 7). Checked by running them too (2026-12-07)."""
    import re
    import shlex

    commands = _shell_commands((REPO / "docs" / "integrations.md").read_text(encoding="utf-8"))
    made: set[str] = set()
    checked = 0
    for command in commands:
        if re.search(r"/abs/path|DIR/|tokenizer\.json| K ", command):
            continue  # a placeholder the reader replaces
        if command.startswith("cp "):
            made.add(shlex.split(command)[-1])
        elif command.startswith("python -c"):
            made.update(re.findall(r"write_\w+\('([^']+)'\)", command))
        elif command.startswith("asp "):
            words = shlex.split(command)
            out = words[words.index("-o") + 1] if "-o" in words else None
            reads = [w for k, w in enumerate(words) if re.search(r"\.(parquet|jsonl)$", w) and words[k - 1] != "-o"]
            for path in reads:
                assert path.startswith("sample_data/") or path in made, f"{command!r} reads {path}, not made before it"
            if out is not None:
                assert out not in made or "--force" in words, f"{command!r} replaces {out} without --force"
                made.add(out)
            checked += 1
    assert checked >= 15


def test_the_benchmarks_headline_matrix_is_its_tables():
    """docs/benchmarks.md leads with a matrix of asp's gain per engine and workload (issue 17: lead with the gain at
    equal footing, per engine and workload, beside the true-lengths ceiling). It is rendered from the tables under
    it by scripts/headline_matrix.py; a table rerun without rewriting the matrix would leave the lead stale."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("headline_matrix", REPO / "scripts" / "headline_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    rendered = module.matrices(doc)
    assert rendered in doc, "docs/benchmarks.md's headline matrix differs from its tables: run python scripts/headline_matrix.py --write"
    assert doc.index(rendered) < doc.index(module.SECTION)  # it leads the page
    assert rendered.count("\n| mix-k8-n8-b256 |") == 2 and "+20.1% +- 1.0% (short-first)" in rendered


def test_the_docs_name_no_slime_flag_that_slime_does_not_have():
    """A slime newcomer looked for `--use-critic` among slime v0.3.1's flags: there is none (its critic comes with
    `--advantage-estimator ppo`, `slime/utils/arguments.py:1847`, and its critic-only steps with
    `--num-critic-only-steps`), and the docs said what was not modelled by that name."""
    for name in ("README.md", "docs/integrations.md", "docs/benchmarks.md"):
        text = (REPO / name).read_text(encoding="utf-8")
        assert "--use-critic" not in text, name


# MindSpeed-RL v2.3.0's configuration keys the docs may name, each read from its source: MegatronConfig
# (mindspeed_rl/config_cls/megatron_config.py), RLConfig (rl_config.py), GenerateConfig (generate_config.py).
_MINDSPEED_RL_KEYS = {
    "megatron_training": {"no_shuffle", "train_iters", "global_batch_size", "data_path", "split", "seed", "finetune",
                          "full_shuffle_instruction_dataset", "seq_length"},
    "rl_config": {"guarantee_order", "max_prompt_length", "n_samples_per_prompt", "actor_rollout_dispatch_size",
                  "partial_rollout_max_split", "actor_resource", "filter_groups_enable", "filter_groups_train_batch_size",
                  "filter_groups_max_batches"},
    "generate_config": {"data_parallel_size", "infer_tensor_parallel_size", "infer_pipeline_parallel_size",
                        "sampling_config", "gpu_memory_utilization"},
}


def test_the_mindspeed_rl_section_names_the_settings_that_keep_the_schedule_and_no_others():
    """A MindSpeed-RL newcomer found the section short of what keeps the export's order in MindSpeed-RL v2.3.0:
    without rl_config.guarantee_order its replicas take a batch's groups at random (transfer_dock.py:857-874), so
    asp's layout of each batch across them was lost; rl_config.max_prompt_length drops long prompts as training
    loads them (build_dataset.py:115-117), shifting every later row; train_iters past the file's whole batches
    reads it again from its start; and the command left --minibatch-size (actor_rollout_dispatch_size) and
    --max-response-tokens (sampling_config.max_tokens) unsaid. Every key it names is one of MindSpeed-RL's."""
    import re

    doc = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    section = doc[doc.index("## MindSpeed-RL\n"):doc.index("## Anything else\n")]
    for needed in ("`rl_config.guarantee_order: true`", "`megatron_training.no_shuffle: true`",
                   "`rl_config.max_prompt_length`", "`megatron_training.train_iters`",
                   "`rl_config.actor_rollout_dispatch_size`", "`generate_config.sampling_config.max_tokens`",
                   "--minibatch-size", "--max-response-tokens", "consumed_train_samples",
                   # Its vLLM keeps 0.4 of the memory beside the trainer: a KV cache a fifth of asp's preset's.
                   "`generate_config.gpu_memory_utilization:", '"gpu_memory_utilization": 0.4',
                   # The trainer's steps for asp calibrate --train-steps, from the metrics it logs each iteration.
                   "`timing/all` - `timing/rollout`",
                   # DAPO's dynamic sampling trains after one or several batches (dapo_trainer_hybrid.py:241-249).
                   "`rl_config.filter_groups_enable:",
                   # Its preprocessing drops a row whose response (the label) is a number (handler_utils.py:176).
                   "handler_utils.py:321-328, 176",
                   # Where a length log is written: its rule reward holds the text and the token counts.
                   "`compute_verifier_score`", 'batch["response_length"]'):
        assert needed in section, needed
    named = re.findall(r"(megatron_training|rl_config|generate_config)\.(?!py\b)(\w+)", section)  # not rl_config.py
    assert len(named) >= 10
    for group, key in named:
        assert key in _MINDSPEED_RL_KEYS[group], f"{group}.{key} is not a MindSpeed-RL v2.3.0 key"


def test_the_pipeline_steps_say_how_verl_run_once_per_epoch_takes_them_before_the_export_block():
    """A verl newcomer pasted steps 1 and 3 (one-epoch schedules exported whole) for one verl run per epoch, which
    trains no step once resumed; the recipe (--epochs K, export --epoch E) came after the blocks. Step 1 says it."""
    text = (REPO / "docs" / "pipelines.md").read_text(encoding="utf-8")
    step1 = " ".join(text.split("### 1.", 1)[1].split("### 2.", 1)[0].split())
    assert "With verl run once per epoch" in step1 and "`--epochs K`" in step1 and "`--epoch E`" in step1
    assert "trainer.total_epochs=1" in step1
    step3 = text.split("### 3.", 1)[1].split("### 4.", 1)[0]
    assert "This loop with verl, one verl run per epoch" in step3  # the section step 1 names
