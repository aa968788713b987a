"""ddtree-tui: deploy, watch and benchmark DFlash / DDTree SGLang services from one terminal screen."""

__version__ = "0.1.0"
