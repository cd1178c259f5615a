"""Drivers that show Reef working end to end through its HTTP API: `reef demo` (a model learning from graded
reports) and `reef discover` (a search on one problem). They start `reef serve` as a child process and talk to it
as any client would; the commands in `reef.cli` only parse arguments and call them."""
