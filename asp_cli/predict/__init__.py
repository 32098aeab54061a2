"""Response-length prediction: prompt features, the model, history, predictions made elsewhere, evaluation."""
