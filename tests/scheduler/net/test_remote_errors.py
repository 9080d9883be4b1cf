"""ErrorReport: an error crossing a process boundary is rebuilt as the same class with the same
message, its user's exception and traceback text along, through pickle or through text."""

from __future__ import annotations

import pickle
import sys

import attrs
import pytest
from hypothesis import given, strategies as st

import deltaflow as df
from deltaflow.errors import OperatorTypeError, OperatorValueError, RemoteTraceback
from deltaflow.scheduler.net.remote_errors import ErrorReport


def raised(exc: BaseException, cause: BaseException | None = None) -> BaseException:
    """``exc`` as it is once raised (from ``cause``): with a traceback."""
    try:
        if cause is None:
            raise exc
        try:
            raise cause
        except BaseException as inner:
            raise exc from inner
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    "exc",
    [
        OperatorValueError("max: key 'k' has NaN among its values", operator="max"),
        OperatorTypeError("sum: key 'k' has values 1 and 'x'", operator="sum"),
        df.PeerLostError("lost the process of worker 1 (process 1)"),
        ValueError("input 'xs': column 'time' is null in the row (x=2)"),
        KeyError("k"),
        KeyboardInterrupt(),
        ModuleNotFoundError("No module named 'mypipes'"),
    ],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize("via", ["pickle", "text"])
def test_known_errors_come_back_as_themselves(exc: BaseException, via: str) -> None:
    """deltaflow's errors and built-in exceptions keep their class, message and operator."""
    report = ErrorReport.of(raised(exc))
    if via == "pickle":
        report = pickle.loads(pickle.dumps(report))
    else:
        report = ErrorReport.from_text(report.to_text())
    again = report.rebuild()
    assert type(again) is type(exc)
    assert str(again) == str(exc)
    assert getattr(again, "operator", None) == getattr(exc, "operator", None)
    assert isinstance(again.__cause__, RemoteTraceback)


def test_the_users_exception_comes_back_as_the_cause() -> None:
    """An OperatorError's user exception comes back pickled, its traceback text its cause."""
    error = raised(df.OperatorError("operator 'map(f)' raised LookupError: x", operator="map(f)"),
                   LookupError("x"))  # fmt: skip
    again = ErrorReport.of(error).rebuild()
    assert type(again) is df.OperatorError and again.operator == "map(f)"  # type: ignore[attr-defined]
    assert type(again.__cause__) is LookupError and again.__cause__.args == ("x",)
    assert "raise cause" in str(again.__cause__.__cause__)
    # As text, its class (a built-in here), plain arguments and traceback travel: made again.
    texted = ErrorReport.from_text(ErrorReport.of(error).to_text()).rebuild()
    assert type(texted.__cause__) is LookupError and texted.__cause__.args == ("x",)
    assert isinstance(texted.__cause__.__cause__, RemoteTraceback)
    assert "LookupError: x" in str(texted.__cause__.__cause__)


def test_a_user_class_comes_back_as_text_only_when_already_imported() -> None:
    """As text, a user exception's class is made again only from a module imported here
    (nothing is imported on a text's word); else the traceback text is the cause."""
    error = raised(df.OperatorError("operator 'f' raised Custom: c", operator="f"), Custom("c"))
    texted = ErrorReport.from_text(ErrorReport.of(error).to_text()).rebuild()
    assert type(texted.__cause__) is Custom and texted.__cause__.args == ("c",)
    report = attrs.evolve(ErrorReport.of(error, with_cause=False), cause_module="not_imported_x")
    again = ErrorReport.from_text(report.to_text()).rebuild()
    assert isinstance(again.__cause__, RemoteTraceback)
    assert "not_imported_x" not in sys.modules


class Custom(Exception):
    """A user exception class the receiving side may not know."""


def test_other_classes_become_what_the_receiver_says() -> None:
    """An exception of a class that is neither deltaflow's nor built in is rebuilt by the
    receiver's ``otherwise``, naming the class."""
    report = ErrorReport.of(raised(Custom("odd")))
    assert repr(report.rebuild()) == repr(df.DeltaflowError("Custom: odd"))
    lost = report.rebuild(lambda text: df.PeerLostError(f"process 1 failed: {text}"))
    assert str(lost) == "process 1 failed: Custom: odd"


def test_text_that_is_no_report_is_refused() -> None:
    """Text that is not a report is a ValueError, whatever it decodes to."""
    for text in ["", "not base64!", "aGVsbG8=", "e30="]:
        with pytest.raises(ValueError, match="not an error report"):
            ErrorReport.from_text(text)


@given(message=st.text(), operator=st.none() | st.text())
def test_any_message_survives_the_text_form(message: str, operator: str | None) -> None:
    """Any message and operator name survive the trip through text."""
    exc = (
        df.OperatorError(message, operator=operator)
        if operator is not None
        else RuntimeError(message)
    )
    again = ErrorReport.from_text(ErrorReport.of(exc).to_text()).rebuild()
    assert type(again) is type(exc) and str(again) == str(exc)
    assert getattr(again, "operator", None) == operator
