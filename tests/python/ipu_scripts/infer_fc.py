"""A Paddle Inference IPU program as a Paddle user wrote it (no Tiller
import): a saved fc model run with Config.enable_ipu (2 micro-batches of 2
rows per run) and set_ipu_config, or with its settings from an IPU config
file (load_ipu_config); `cpu` runs the same model on Paddle's CPU predictor.
Prints the output and the predictor's module as JSON.

    python infer_fc.py ipu|ipu_file|cpu MODEL_PREFIX [IPU_CONFIG_FILE]
"""
import json
import os
import sys

import numpy as np
import paddle.inference as paddle_infer

mode, prefix = sys.argv[1], sys.argv[2]
# Paddle 3 saves model.json (PIR), Paddle 2 model.pdmodel.
model = prefix + ".json" if os.path.exists(prefix + ".json") else prefix + ".pdmodel"
config = paddle_infer.Config(model, prefix + ".pdiparams")
config.set_cpu_math_library_num_threads(1)
if mode == "ipu":
    config.enable_ipu(1, 2, False, 2)
    config.set_ipu_config(False, 1)
elif mode == "ipu_file":
    config.enable_ipu()
    config.load_ipu_config(sys.argv[3])
predictor = paddle_infer.create_predictor(config)
x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8) / 10.0
handle = predictor.get_input_handle(predictor.get_input_names()[0])
handle.reshape(x.shape)
handle.copy_from_cpu(x)
predictor.run()
out = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
print(json.dumps({"out": np.asarray(out).tolist(), "module": type(predictor).__module__}))
