"""Lowering, printing, handles, verification and prepare_for_codegen of the untransformed nest."""
import pytest

from te import Buffer, Compute, Reduce, Sum, Var, float32, int32
from loopnest import LoopNest, ScheduleError, VerifyError
from loopnest.errors import LoweringError
from loopnest.passes import PASSES


def _contract_example():
    N = Var("N", int32)
    A = Buffer("A", (N, 64), float32)
    B = Compute("B", (N, 64), lambda i, j: A[i, j] * 2.0 + 1.0)
    C = Reduce("C", (N,), Sum(), lambda i, k: B[i, k], (64,))
    return N, A, B, C


def test_lowering_prints_one_nest_per_tensor_in_dependency_order():
    N, A, B, C = _contract_example()
    nest = LoopNest([C])
    assert str(nest) == """\
for (int i = 0; i < N; i++) {
  for (int j = 0; j < 64; j++) {
    B[i, j] = A[i, j] * 2.0f + 1.0f;
  }
}
for (int i_1 = 0; i_1 < N; i_1++) {
  C[i_1] = 0.0f;
  for (int k = 0; k < 64; k++) {
    C[i_1] = C[i_1] + B[i_1, k];
  }
}"""
    assert nest.intermediates == [B]
    assert nest.inputs == [A]


def test_get_loops_for_includes_reduction_loops():
    N, A, B, C = _contract_example()
    nest = LoopNest([C])
    assert [l.name for l in nest.get_loops_for(C)] == ["i_1", "k"]
    assert [l.name for l in nest.get_loops_for(B)] == ["i", "j"]
    i, j = nest.get_loops_for(B)
    assert j.extent == 64 and i.extent is N
    assert nest.get_parent_loop(j) == i
    assert nest.get_inner_loops(i) == [j]


def test_loop_handles_resolve_by_name_and_reject_strangers():
    N, A, B, C = _contract_example()
    nest = LoopNest([C])
    assert nest.loop("k").name == "k"
    with pytest.raises(ScheduleError, match="no loop named 'zz'"):
        nest.loop("zz")
    other = Buffer("Other", (3,), "float32")
    with pytest.raises(ScheduleError, match="not a buffer of this nest"):
        nest.get_loops_for(other)


def test_prepare_for_codegen_flattens_and_allocates():
    N, A, B, C = _contract_example()
    nest = LoopNest([C])
    nest.prepare_for_codegen()
    text = str(nest)
    assert text.splitlines()[0] == "float32 B[N, 64]; // alloc"
    assert text.splitlines()[-1] == "free(B);"
    # N rows: the buffers may exceed 2^31 elements, so their flat indices are int64
    assert "B[int64(i) * int64(64) + int64(j)] = A[int64(i) * int64(64) + int64(j)] * 2.0f + 1.0f;" in text
    assert "C[int64(i_1)] = C[int64(i_1)] + B[int64(i_1) * int64(64) + int64(k)];" in text
    with pytest.raises(ScheduleError, match="prepared for codegen"):
        nest.split_with_tail(nest.get_all_loops()[0], 4)


def test_prepare_dump(capsys):
    N, A, B, C = _contract_example()
    LoopNest([C]).prepare_for_codegen(dump=True)
    err = capsys.readouterr().err
    for name, _ in PASSES:
        assert f"// ---- before {name} ----" in err and f"// ---- after {name} ----" in err


def test_allocation_is_tightest_block():
    A = Buffer("A", (8,), "float32")
    B = Compute("B", (8,), lambda i: A[i] + 1.0)
    C = Compute("C", (8,), lambda i: B[i] * 2.0)
    D = Compute("D", (8,), lambda i: A[i] - 1.0)
    nest = LoopNest([D, C])
    nest.prepare_for_codegen()
    lines = str(nest).splitlines()
    alloc = lines.index("float32 B[8]; // alloc")
    free = lines.index("free(B);")
    body = "\n".join(lines[alloc:free])
    assert "D[" not in body  # D's loop is outside B's lifetime
    assert "C[i_2] = B[i_2] * 2.0f;" in body


def test_verify_finds_unbound_variable():
    A = Buffer("A", (4,), "float32")
    B = Compute("B", (4,), lambda i: A[i])
    nest = LoopNest([B])
    from loopnest.stmt import Block, Store
    i = nest.get_loops_for(B)[0].var
    nest.root = Block(nest.root.stmts + (Store(B, (i,), 1.0),))   # i used after its loop
    with pytest.raises(VerifyError, match="variable i is used"):
        nest.verify()


def test_cycle_is_a_lowering_error():
    A = Buffer("A", (4,), "float32")
    B = Compute("B", (4,), lambda i: A[i])
    C = Compute("C", (4,), lambda i: B[i])
    B.body = C[B.args[0]]  # hand-made cycle
    with pytest.raises(LoweringError, match="cycle"):
        LoopNest([C])


def test_duplicate_buffer_names_rejected():
    A1 = Buffer("A", (4,), "float32")
    A2 = Buffer("A", (4,), "float32")
    B = Compute("B", (4,), lambda i: A1[i] + A2[i])
    with pytest.raises(ValueError, match="named 'A'"):
        LoopNest([B])


def test_outputs_must_be_tensors():
    with pytest.raises(TypeError, match="tensors made by Compute"):
        LoopNest([Buffer("A", (4,), "float32")])


def test_free_scalar_variables_are_kernel_parameters():
    from loopnest.verify import free_vars
    alpha = Var("alpha", float32)
    A = Buffer("A", (4,), float32)
    B = Compute("B", (4,), lambda i: A[i] * alpha)
    nest = LoopNest([B])
    assert [v.name for v in free_vars(nest.root)] == ["alpha"]
    nest.prepare_for_codegen()   # verifies: alpha is a parameter, not an unbound loop variable
