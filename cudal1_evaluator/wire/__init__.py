"""What crosses a process boundary: channels, the talk protocol, reports, shared tensors."""
