"""The command line: listing kernels, and tuning one for a few trials."""
import importlib.util

import pytest

from tune.cli import main

TARGET = "llvm" if importlib.util.find_spec("codegen.llvm") else "ireval"


def test_list(capsys):
    assert main(["--list"]) == 0
    assert capsys.readouterr().out.split() == ["matmul", "conv2d", "softmax", "elementwise"]
    assert main(["matmul", "--list-params"]) == 0
    assert "M=128" in capsys.readouterr().out


def test_bad_parameter():
    with pytest.raises(SystemExit, match="bad parameter"):
        main(["matmul", "-p", "Q=3"])


def test_cuda_is_not_offered(capsys):
    """The command line tunes with the automatic space, which schedules CPU targets only:
    asking for cuda is an argument error, not a traceback from the space."""
    with pytest.raises(SystemExit) as e:
        main(["matmul", "--target", "cuda"])
    assert e.value.code == 2 and "invalid choice: 'cuda'" in capsys.readouterr().err


def test_tune_elementwise_from_the_command_line(tmp_path, capsys):
    db, out = tmp_path / "cli.db", tmp_path / "cli.jsonl"
    rc = main(["elementwise", "-p", "rows=8", "-p", "cols=16", "--trials", "3", "--db", str(db), "--target", TARGET,
               "--strategy", "random", "--export", str(out), "--repeats", "1", "--quiet"])
    text = capsys.readouterr().out
    assert rc == 0 and "best:" in text and "GFLOP/s" in text
    assert out.read_text().count("\n") == 3


def test_progress_line_and_tuning_curve(tmp_path, capsys):
    import io
    from tune.plot import best_so_far, plot_tuning_curve
    from tune.progress import Progress, format_time
    out = io.StringIO()
    p = Progress(4, stream=out, interval=0.0, flops=2e6)
    p.update(best=2e-3)
    p.update(error=True)
    p.update(best=1e-3)
    p.update(best=5e-3)
    p.close()
    last = out.getvalue().strip().splitlines()[-1]
    assert "4/4" in last and "best 1.000 ms" in last and "2.00 GFLOP/s" in last and "(1 failed)" in last
    assert format_time(None) == "-" and format_time(2.5e-6) == "2.500 us"
    costs = [3.0, float("inf"), 1.0, 2.0]
    assert best_so_far(costs) == [3.0, 3.0, 1.0, 1.0]
    path = tmp_path / "curve.png"
    got = plot_tuning_curve(costs, str(path), flops=1e9)
    try:
        import matplotlib  # noqa: F401
        assert got == str(path) and path.stat().st_size > 1000
    except ImportError:
        assert got is None and "matplotlib is not installed" in capsys.readouterr().err
