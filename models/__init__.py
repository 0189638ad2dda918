"""Tiller's reference model zoo: Paddle (paddle.nn) BERT, ERNIE 3.0 and ResNet
at configurable sizes, exported as Paddle inference models (PIR model.json or
legacy model.pdmodel) and run with Paddle Inference as the reference.

    from models import PRESETS, build_model, make_inputs, eager_forward
    from models.export import export, paddle_infer, paddle_bench
    from models.inventory import program_ops        # op inventory of a saved program

(``models.export`` is deliberately not re-exported here: the submodule and the
function share the name, and ``python -m models.export`` must not import the
module twice.) Importing this package imports paddle.
"""

from .zoo import PRESETS, ModelSpec, build_model, eager_forward, get_spec, input_specs, make_inputs

__all__ = ["PRESETS", "ModelSpec", "build_model", "eager_forward", "get_spec", "input_specs",
           "make_inputs"]
