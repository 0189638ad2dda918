"""A Paddle IPU training script as a Paddle user wrote it (no Tiller import):
a two-layer classifier sharded over two IPUs with ipu_shard_guard, Adam,
trained through IpuStrategy / IpuCompiledProgram / Executor.run, then
weights_to_host and paddle.static.save. `cpu` runs the same program on
Paddle's CPU executor, as Paddle's IPU tests compare. Prints the losses and
the trained weights' sums as JSON.

    python train_two_stages.py ipu|cpu OUT_PREFIX
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
main.random_seed = startup.random_seed = 42
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [4, 8], "float32")
    y = paddle.static.data("y", [4, 1], "int64")
    with paddle.static.ipu_shard_guard(index=0, stage=0):
        h = paddle.static.nn.fc(x, 16, activation="relu")
    with paddle.static.ipu_shard_guard(index=1, stage=1):
        logits = paddle.static.nn.fc(h, 3)
        loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, y))
    paddle.optimizer.Adam(learning_rate=0.01).minimize(loss)

place = paddle.IPUPlace() if mode == "ipu" else paddle.CPUPlace()
exe = paddle.static.Executor(place)
exe.run(startup)
program = main
if mode == "ipu":
    assert paddle.is_compiled_with_ipu()
    ipu_strategy = paddle.static.IpuStrategy()
    ipu_strategy.set_graph_config(num_ipus=2, is_training=True, micro_batch_size=4,
                                  enable_manual_shard=True)
    ipu_strategy.set_pipelining_config(enable_pipelining=False, batches_per_step=1)
    program = paddle.static.IpuCompiledProgram(main, ipu_strategy=ipu_strategy).compile(
        [x.name, y.name], [loss])

rng = np.random.default_rng(0)
batches = [{"x": rng.standard_normal((4, 8)).astype(np.float32),
            "y": rng.integers(0, 3, (4, 1)).astype(np.int64)} for _ in range(4)]
losses = []
for step in range(12):
    feed = batches[step % len(batches)]
    loss_value = exe.run(program, feed=feed, fetch_list=[loss])
    losses.append(float(np.asarray(loss_value[0]).reshape(-1)[0]))
if mode == "ipu":
    paddle.base.core.IpuBackend.get_instance().weights_to_host()
paddle.static.save(main, out)
with open(out + ".pdparams", "rb") as f:
    weights = {name: float(np.asarray(value).sum()) for name, value in pickle.load(f).items()}
print(json.dumps({"losses": losses, "weights": weights}))
