"""tune: search schedules automatically, measure them safely, remember the best.

>>> import tune
>>> sorted(tune.STRATEGIES)
['evolutionary', 'grid', 'model', 'random']

The usual entry points are ``autotune(outputs, args, target="llvm", trials=N, db=path)``
(returns the best built kernel and its record) and ``apply_best(nest, db)`` (replays the
best stored schedule onto a fresh nest). ``python -m tune matmul --trials 50 --db r.db``
tunes a built-in kernel from the command line.
"""
from .api import apply_best, autotune, open_db, tune_task
from .auto import auto_space
from .cost_model import CostModel, GradientBoostedTrees
from .database import Database, Record
from .device import device_fingerprint
from .errors import DatabaseError, ErrorKind, SpaceError, TuneError, WorkerCrashed, WorkerTimeout
from .executor import LocalExecutor
from .runner import MeasureOptions, MeasureResult, Runner
from .space import Config, Knob, ScheduleSpace, Space
from .strategies import STRATEGIES, Evolutionary, GridSearch, ModelGuided, RandomSearch, Strategy, make_strategy
from .task import Task, workload_key
from .tuner import Tuner, TuneResult

__all__ = ["autotune", "apply_best", "open_db", "tune_task", "auto_space", "CostModel", "GradientBoostedTrees",
           "Database", "Record", "device_fingerprint", "DatabaseError", "ErrorKind", "SpaceError", "TuneError",
           "WorkerCrashed", "WorkerTimeout", "LocalExecutor", "MeasureOptions", "MeasureResult", "Runner",
           "Config", "Knob", "ScheduleSpace", "Space", "STRATEGIES", "Evolutionary", "GridSearch", "ModelGuided",
           "RandomSearch", "Strategy", "make_strategy", "Task", "workload_key", "Tuner", "TuneResult"]
