"""The problem-file contract, shown to the user whenever a file does not meet it."""

CONTRACT = '''\
expected a problem file in the KernelBench format, for example:

    import torch
    import torch.nn as nn

    batch_size = 4096            # module-level sizes
    dim = 8192

    class Model(nn.Module):
        """What the module computes."""

        def __init__(self, scale: float):     # optional
            super().__init__()
            self.scale = scale

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * self.scale

    def get_inputs():            # no parameters: the forward inputs, a list of tensors
        return [torch.randn(batch_size, dim)]

    def get_init_inputs():       # no parameters: Model's constructor arguments
        return [2.0]'''
