"""A BERT-style Paddle IPU training script as a Paddle user wrote it (no
Tiller import): embedding + encoder-like layers in two pipeline stages
(ipu_shard_guard), 2 replicas x 2 stages = 4 IPUs, gradient accumulation 4,
micro-batch 2, AdamW with a LinearWarmup LR scheduler stepped each update,
weights_to_host and paddle.static.save at the end. `cpu` runs the same
program on Paddle's CPU executor with the global batch (16) per step.
Prints the per-step losses and the saved weights' sums as JSON.

    python train_pipelined.py ipu|cpu OUT_PREFIX
"""
import json
import pickle
import sys

import numpy as np
import paddle
import paddle.static

mode, out = sys.argv[1], sys.argv[2]
paddle.enable_static()
main, startup = paddle.static.Program(), paddle.static.Program()
main.random_seed = startup.random_seed = 7
with paddle.static.program_guard(main, startup):
    ids = paddle.static.data("ids", [-1, 12], "int64")
    label = paddle.static.data("label", [-1, 1], "int64")
    with paddle.static.ipu_shard_guard(index=0, stage=0):
        emb = paddle.nn.Embedding(50, 32)(ids)
        pooled = paddle.mean(emb, axis=1)
        h = paddle.static.nn.fc(pooled, 32, activation="relu")
    with paddle.static.ipu_shard_guard(index=1, stage=1):
        h2 = paddle.nn.LayerNorm(32)(paddle.static.nn.fc(h, 32) + h)
        logits = paddle.static.nn.fc(paddle.nn.functional.gelu(h2), 4)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
    scheduler = paddle.optimizer.lr.LinearWarmup(learning_rate=0.01, warmup_steps=3,
                                                 start_lr=0.001, end_lr=0.01)
    paddle.optimizer.AdamW(learning_rate=scheduler, weight_decay=0.01).minimize(loss)

exe = paddle.static.Executor(paddle.IPUPlace() if mode == "ipu" else paddle.CPUPlace())
exe.run(startup)
program = main
if mode == "ipu":
    ipu_strategy = paddle.static.IpuStrategy()
    ipu_strategy.set_graph_config(num_ipus=4, is_training=True, micro_batch_size=2,
                                  enable_manual_shard=True)
    ipu_strategy.set_pipelining_config(enable_pipelining=True, batches_per_step=1,
                                       enable_gradient_accumulation=True, accumulation_factor=4)
    ipu_strategy.set_options({"enable_replicated_graphs": True, "replicated_graph_count": 2})
    ipu_compiler = paddle.static.IpuCompiledProgram(main, ipu_strategy=ipu_strategy)
    program = ipu_compiler.compile(["ids", "label"], [loss])

rng = np.random.default_rng(1)
batches = [{"ids": rng.integers(0, 50, (16, 12)).astype(np.int64),
            "label": rng.integers(0, 4, (16, 1)).astype(np.int64)} for _ in range(3)]
losses = []
for step in range(9):
    value = exe.run(program, feed=batches[step % 3], fetch_list=[loss])[0]
    losses.append(float(np.mean(value)))   # the IPU returns one loss per micro-batch
    scheduler.step()
if mode == "ipu":
    ipu_compiler._backend.weights_to_host()
paddle.static.save(main, out)
with open(out + ".pdparams", "rb") as f:
    weights = {name: float(np.asarray(value).sum()) for name, value in pickle.load(f).items()}
print(json.dumps({"losses": losses, "weights": weights}))
