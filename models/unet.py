"""UNet-style segmentation net: an encoder of conv-BN-ReLU blocks with max
pooling, a decoder that upsamples once with conv2d_transpose and once with
bilinear interpolation, skip connections by concat, and a 1x1 head.

Input: x float32 [batch, 3, H, W]; output: logits [batch, classes, H, W].
"""
from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn as nn
import paddle.nn.functional as F


@dataclass(frozen=True)
class UNetConfig:
    channels: tuple = (8, 16, 32)
    num_classes: int = 4
    image_size: int = 32


PRESETS = {
    "unet-tiny": UNetConfig(),
    # The zoo benchmark's size (bench/bench_zoo.py).
    "unet-base": UNetConfig(channels=(32, 64, 128), image_size=256),
}
INPUTS = (("x", "float32"),)
OUTPUTS = ("logits",)


def _block(cin, cout):
    return nn.Sequential(nn.Conv2D(cin, cout, 3, padding=1), nn.BatchNorm2D(cout), nn.ReLU(),
                         nn.Conv2D(cout, cout, 3, padding=1), nn.BatchNorm2D(cout), nn.ReLU())


class UNet(nn.Layer):
    def __init__(self, cfg: UNetConfig):
        super().__init__()
        c1, c2, c3 = cfg.channels
        self.enc1, self.enc2, self.mid = _block(3, c1), _block(c1, c2), _block(c2, c3)
        self.pool = nn.MaxPool2D(2, 2)
        self.up2 = nn.Conv2DTranspose(c3, c2, 2, stride=2)      # learned upsampling
        self.dec2 = _block(2 * c2, c2)
        self.reduce1 = nn.Conv2D(c2, c1, 1)
        self.dec1 = _block(2 * c1, c1)
        self.head = nn.Conv2D(c1, cfg.num_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        m = self.mid(self.pool(e2))
        d2 = self.dec2(paddle.concat([self.up2(m), e2], axis=1))
        up1 = F.interpolate(self.reduce1(d2), scale_factor=2, mode="bilinear", align_corners=False)
        d1 = self.dec1(paddle.concat([up1, e1], axis=1))
        return self.head(d1)
