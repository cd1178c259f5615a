"""The torch side of weight training: the training job that runs in its own process (forward, losses, optimizer
step, adapter output) and the values that cross into it. Importing this package imports no torch; only the job
modules do, and only the training process imports them."""
