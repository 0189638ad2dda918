"""MobileNetV3-style CNN (inverted residual blocks with depthwise convs,
squeeze-and-excitation and hard-swish), for op coverage beyond ResNet:
depthwise conv2d, hard_swish, hard_sigmoid, adaptive pooling, elementwise
multiply with broadcasting, dropout.

Input: x float32 [batch, 3, H, W]; output: logits [batch, num_classes].
"""
from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn as nn


@dataclass(frozen=True)
class MobileNetConfig:
    # (kernel, expanded channels, out channels, squeeze-excite, activation, stride)
    blocks: tuple = ((3, 16, 16, True, "relu", 2), (3, 72, 24, False, "relu", 2),
                     (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hardswish", 2),
                     (5, 240, 40, True, "hardswish", 1), (5, 120, 48, True, "hardswish", 1))
    stem_channels: int = 16
    head_channels: int = 288
    hidden: int = 256
    num_classes: int = 10
    image_size: int = 64


PRESETS = {
    "mobilenet-tiny": MobileNetConfig(),
}
INPUTS = (("x", "float32"),)
OUTPUTS = ("logits",)


def _act(name):
    return nn.ReLU() if name == "relu" else nn.Hardswish()


class SqueezeExcite(nn.Layer):
    def __init__(self, ch, reduction=4):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.reduce = nn.Conv2D(ch, ch // reduction, 1)
        self.expand = nn.Conv2D(ch // reduction, ch, 1)

    def forward(self, x):
        s = self.pool(x)
        s = nn.functional.relu(self.reduce(s))
        s = nn.functional.hardsigmoid(self.expand(s))
        return x * s


class InvertedResidual(nn.Layer):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        self.residual = stride == 1 and cin == cout
        layers = []
        if exp != cin:
            layers += [nn.Conv2D(cin, exp, 1, bias_attr=False), nn.BatchNorm2D(exp), _act(act)]
        layers += [nn.Conv2D(exp, exp, k, stride=stride, padding=k // 2, groups=exp, bias_attr=False),
                   nn.BatchNorm2D(exp), _act(act)]
        if se:
            layers.append(SqueezeExcite(exp))
        layers += [nn.Conv2D(exp, cout, 1, bias_attr=False), nn.BatchNorm2D(cout)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNet(nn.Layer):
    def __init__(self, cfg: MobileNetConfig):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2D(3, cfg.stem_channels, 3, stride=2, padding=1, bias_attr=False),
                                  nn.BatchNorm2D(cfg.stem_channels), nn.Hardswish())
        blocks, cin = [], cfg.stem_channels
        for k, exp, cout, se, act, stride in cfg.blocks:
            blocks.append(InvertedResidual(cin, k, exp, cout, se, act, stride))
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.Conv2D(cin, cfg.head_channels, 1, bias_attr=False),
                                  nn.BatchNorm2D(cfg.head_channels), nn.Hardswish(),
                                  nn.AdaptiveAvgPool2D(1))
        self.classifier = nn.Sequential(nn.Linear(cfg.head_channels, cfg.hidden), nn.Hardswish(),
                                        nn.Dropout(0.2), nn.Linear(cfg.hidden, cfg.num_classes))

    def forward(self, x):
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(paddle.flatten(x, 1))
