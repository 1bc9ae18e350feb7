"""The exchange state machine (``fusion_nb.mcp.exchange_core``): every legal move, illegal ones, random orderings."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusion_nb.mcp.exchange_core import ENDED, Client, ExchangeState, ExchangeStateError, Move, Phase

LEGAL = [
    (Phase.RUNNING, Move.STREAM, Phase.STREAMING),
    (Phase.RUNNING, Move.SETTLE, Phase.SETTLED),
    (Phase.RUNNING, Move.ABANDON, Phase.ABANDONED),
    (Phase.STREAMING, Move.STREAM, Phase.STREAMING),
    (Phase.STREAMING, Move.SETTLE, Phase.SETTLED_STREAMING),
    (Phase.STREAMING, Move.ABANDON, Phase.ABANDONED),
    (Phase.SETTLED, Move.ANSWER, Phase.ANSWERED),
    (Phase.SETTLED, Move.ABANDON, Phase.ABANDONED),
    (Phase.SETTLED_STREAMING, Move.ANSWER, Phase.ANSWERED),
    (Phase.SETTLED_STREAMING, Move.ABANDON, Phase.ABANDONED),
]
PATHS = {
    Phase.RUNNING: [],
    Phase.STREAMING: [Move.STREAM],
    Phase.SETTLED: [Move.SETTLE],
    Phase.SETTLED_STREAMING: [Move.STREAM, Move.SETTLE],
    Phase.ANSWERED: [Move.SETTLE, Move.ANSWER],
    Phase.ABANDONED: [Move.ABANDON],
}


def reach(phase: Phase) -> ExchangeState:
    state = ExchangeState()
    for move in PATHS[phase]:
        state.apply(move)
    assert state.phase is phase
    return state


@pytest.mark.parametrize(("start", "move", "end"), LEGAL, ids=lambda value: getattr(value, "value", value))
def test_every_legal_move_leads_where_the_table_says(start, move, end):
    state = reach(start)
    assert state.allows(move)
    assert state.apply(move) is end


def test_every_other_move_raises_and_leaves_the_state_as_it_was():
    legal = {(start, move) for start, move, _ in LEGAL}
    refused = 0
    for phase in Phase:
        for move in Move:
            if (phase, move) in legal:
                continue
            state = reach(phase)
            assert not state.allows(move)
            with pytest.raises(ExchangeStateError, match=f"phase '{phase.value}' cannot {move.value}"):
                state.apply(move)
            assert state.phase is phase
            refused += 1
    assert refused == len(Phase) * len(Move) - len(LEGAL)


def test_an_ended_exchange_allows_nothing_and_a_client_leaves_once():
    for phase in ENDED:
        assert not any(reach(phase).allows(move) for move in Move)
    state = ExchangeState()
    state.disconnect()
    assert state.client is Client.GONE and state.phase is Phase.RUNNING  # a 2025 call runs on
    with pytest.raises(ExchangeStateError, match="disconnect twice"):
        state.disconnect()


@given(st.lists(st.sampled_from(list(Move)), max_size=12), st.booleans())
def test_any_ordering_driven_as_the_endpoint_drives_it_ends_once_with_one_outcome(moves, modern):
    """Whatever happens in whatever order, the endpoint's rule (answer or abandon what has not ended) ends it once."""
    state = ExchangeState()
    answers = endings = 0
    for move in moves:
        if not state.allows(move):
            with pytest.raises(ExchangeStateError):
                state.apply(move)
            continue
        was_ended = state.ended
        state.apply(move)
        assert state.phase in Phase
        answers += move is Move.ANSWER
        endings += state.ended and not was_ended
    # the endpoint's ending: a 2026 exchange not ended is abandoned, a 2025 one is answered (``end_cancelled``)
    if not state.ended:
        if modern:
            state.apply(Move.ABANDON)
        else:
            if state.running:
                state.apply(Move.SETTLE)
            state.apply(Move.ANSWER)
            answers += 1
        endings += 1
    assert state.ended and endings == 1 and answers <= 1
    assert answers == 1 or state.phase is Phase.ABANDONED
