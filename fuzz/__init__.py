"""fuzz: the random program and schedule tester.

Random programs (``fuzz.programs``) get random schedules (``fuzz.schedules``); every
schedule is checked (``fuzz.check``): a refused transform raises ScheduleError and leaves
the nest unchanged, the scheduled program on every target equals the unscheduled one on
IREval and the float64 numpy reference (``fuzz.reference``), and the recorded history
replays to the same nest. Failures are minimised into standalone reproducer scripts
(``fuzz.minimize``). ``python -m fuzz --seconds 600 --seed 1 --out DIR`` runs a campaign.

>>> from fuzz.campaign import run_campaign
>>> summary = run_campaign(seed=5, count=2, targets=("ireval",), quiet=True)
>>> summary.schedules
2
"""
