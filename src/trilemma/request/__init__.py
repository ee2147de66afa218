"""One typed request per verb: each field written once with its flag, JSON and scenario key, unit
parser, default and help (:mod:`trilemma.request.field`). The CLI's options, the web API's bodies,
scenario files and the Python API are derived from them."""

from trilemma.request.estimate import EstimateRequest
from trilemma.request.export import ExportRequest
from trilemma.request.field import Opt, Request, option
from trilemma.request.fit import FitRequest
from trilemma.request.ladder import LadderRequest
from trilemma.request.optimal import OptimalRequest
from trilemma.request.presets import PresetsRequest
from trilemma.request.probe import ProbeRequest
from trilemma.request.serve import ServeRequest
from trilemma.request.solve import SolveRequest
from trilemma.request.validate import ValidateRequest

__all__ = [
    "EstimateRequest",
    "ExportRequest",
    "FitRequest",
    "LadderRequest",
    "OptimalRequest",
    "Opt",
    "PresetsRequest",
    "ProbeRequest",
    "Request",
    "ServeRequest",
    "SolveRequest",
    "ValidateRequest",
    "option",
]
