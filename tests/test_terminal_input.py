"""The chat's terminal input decoder (tui/chat/driver.py): what Textual's parser is handed."""

from __future__ import annotations

from codeqa.tui.chat.driver import TerminalInputDecoder


def test_an_escape_inside_a_paste_is_text_and_the_paste_still_ends():
    decoder = TerminalInputDecoder()
    assert decoder.decode(b"\x1b[200~a\x1b[31mb\n\x1b[201~") == "\x1b[200~a␛[31mb\n\x1b[201~"


def test_a_paste_end_cut_by_a_read_is_joined_with_the_next_read():
    decoder = TerminalInputDecoder()
    assert decoder.decode(b"\x1b[200~ab\x1b[20") == "\x1b[200~ab"
    assert decoder.decode(b"1~\x1b[A") == "\x1b[201~\x1b[A"  # the up key after it is a key


def test_keys_outside_a_paste_pass_at_once_and_bytes_not_utf8_become_replacement():
    decoder = TerminalInputDecoder()
    assert decoder.decode(b"\x1b") == "\x1b"  # escape pressed: never held back
    assert decoder.decode(b"caf\xe9 ok") == "caf\ufffd ok"
