"""The parts of torch.distributed.elastic that scripts launched by torchrun import."""
