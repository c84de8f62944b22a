"""One module per CLI verb: the only place an argparse.Namespace exists."""
