"""An item's verdict as words: the failure message pytest shows, and the pairing note every report prints.

The gate and the run hand over values (the outcome, the pairing); how they read is decided
here alone, so the terminal, the Markdown and the HTML say the same thing.
"""

from __future__ import annotations

from ..results.item import ItemResult, PairingNote


def pairing_text(note: PairingNote) -> str:
    """How the item's sides were paired and why, with what the switches cost and the levels that shared the boots."""
    text = f"pairing: {note.mode}: {note.why}"
    if note.switches:
        text += f"; {note.switches}"
    if note.shared_with:
        text += f"; levels {', '.join(note.shared_with)} measured on the same boots"
    return text


def item_notes(item: ItemResult) -> list[str]:
    """The gate's notes on the item, then how its sides were paired."""
    notes = list(item.outcome.notes) if item.outcome is not None else []
    return notes + ([pairing_text(item.pairing)] if item.pairing is not None else [])


def verdict_message(item: ItemResult) -> str:
    """What pytest shows for an item that fails its gate: the verdict, the broken limits, each claim, the notes."""
    assert item.outcome is not None, "a verdict message is made for a judged item"
    message = item.outcome.message(item.nodeid)
    if item.pairing is not None:
        message += f"\n  note: {pairing_text(item.pairing)}"
    return message
