"""trilemma: speed, quality and cost of Transformer training, with numbers you can check."""

__version__ = "0.1.0"
