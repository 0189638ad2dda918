"""ResNet with width/depth options, structured like ``paddle.vision.models.ResNet``
(conv7x7/2 - BN - ReLU - maxpool3x3/2 - 4 stages - adaptive avg pool -
flatten - FC), so "resnet50" exports the same op graph as
``paddle.vision.models.resnet50()``.

Input: x float32 [batch, 3, H, W]; output: logits [batch, num_classes].
BatchNorm runs in inference mode (running statistics), which the zoo
randomises so batch_norm is not an identity.
"""

from __future__ import annotations

from dataclasses import dataclass

import paddle
import paddle.nn as nn


@dataclass(frozen=True)
class ResNetConfig:
    block: str = "bottleneck"           # "basic" (resnet18/34) or "bottleneck" (50/101/152)
    layers: tuple = (3, 4, 6, 3)
    base_channels: int = 64
    num_classes: int = 1000
    image_size: int = 224


PRESETS: dict[str, ResNetConfig] = {
    "resnet-tiny": ResNetConfig(block="basic", layers=(1, 1, 1, 1), base_channels=16,
                                num_classes=10, image_size=64),
    "resnet18": ResNetConfig(block="basic", layers=(2, 2, 2, 2)),
    "resnet50": ResNetConfig(),
}


class BasicBlock(nn.Layer):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2D(inplanes, planes, 3, padding=1, stride=stride, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(planes)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2D(planes, planes, 3, padding=1, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class BottleneckBlock(nn.Layer):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2D(inplanes, planes, 1, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(planes)
        self.conv2 = nn.Conv2D(planes, planes, 3, padding=1, stride=stride, bias_attr=False)
        self.bn2 = nn.BatchNorm2D(planes)
        self.conv3 = nn.Conv2D(planes, planes * self.expansion, 1, bias_attr=False)
        self.bn3 = nn.BatchNorm2D(planes * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = downsample

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Layer):
    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        self.cfg = cfg
        block = BasicBlock if cfg.block == "basic" else BottleneckBlock
        c = cfg.base_channels
        self.inplanes = c
        self.conv1 = nn.Conv2D(3, c, 7, stride=2, padding=3, bias_attr=False)
        self.bn1 = nn.BatchNorm2D(c)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, c, cfg.layers[0])
        self.layer2 = self._make_layer(block, c * 2, cfg.layers[1], stride=2)
        self.layer3 = self._make_layer(block, c * 4, cfg.layers[2], stride=2)
        self.layer4 = self._make_layer(block, c * 8, cfg.layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2D((1, 1))
        self.fc = nn.Linear(c * 8 * block.expansion, cfg.num_classes)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2D(self.inplanes, planes * block.expansion, 1, stride=stride, bias_attr=False),
                nn.BatchNorm2D(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = paddle.flatten(self.avgpool(x), 1)
        return self.fc(x)


INPUTS = (("x", "float32"),)
OUTPUTS = ("logits",)
