"""What an Ogg Opus file's page headers say, and whether to believe them, without decoding.

ffmpeg decodes a voice note up to the first damage (the last page cut short by a stopped
download, bytes that are not a page) and says nothing to its caller; :func:`check_ogg` finds the
damage so that ``bot.chat.audio`` can log that a note was decoded only in part, and how much
sound the pages claim. The claim comes from the pages' granule positions, which a truncated or
hostile file can fill with anything (a granule of 2**40 samples claims 265 days), so a duration
is stated only when every granule position is *plausible*: the one the Ogg Opus specification
requires given the packets on the page.

Sources: RFC 3533 (the Ogg page: "OggS", version, header type, granule position, serial,
sequence, CRC, segment table; a packet ends at a lacing value below 255), RFC 7845 (Ogg Opus:
section 3, the ``OpusHead`` and ``OpusTags`` header packets first; section 4, granule positions
count 48 kHz samples, a page that completes no packet has -1, every page after the first with
completed packets has "the number of samples contained in packets that complete on that page
plus the granule position of the most recent page with completed packets"; 4.4, the last page
may trim at most its last packet; 4.5, the first audio page's granule may exceed its samples
(a stream that starts late) but not fall short of them), RFC 6716 section 3.1 (an Opus
packet's duration from its TOC byte: 2.5 to 60 ms frames, 1, 2 or M frames, at most 120 ms).
"""

from __future__ import annotations

import re
from typing import NamedTuple

OPUS_GRANULE_HZ = 48_000
"""An Ogg Opus granule position counts samples at 48 kHz whatever the input rate (RFC 7845
section 4), less the pre-skip of its ``OpusHead``."""
MIN_PACKET_SAMPLES = 120
"""Fewest samples in an Opus packet: one 2.5 ms frame at 48 kHz (RFC 6716 section 3.1)."""
MAX_PACKET_SAMPLES = 5760
"""Most samples in an Opus packet: 120 ms at 48 kHz (RFC 6716 section 3.2.5; RFC 7845 section 4:
"up to a maximum of 120 ms")."""
_FRAME_SAMPLES = (480, 960, 1920, 2880) * 3 + (480, 960) * 2 + (120, 240, 480, 960) * 4
"""Samples of one frame at 48 kHz by TOC configuration 0-31 (RFC 6716 section 3.1, table 2):
SILK 10/20/40/60 ms, Hybrid 10/20 ms, CELT 2.5/5/10/20 ms."""
_PACKET_END = re.compile(rb"[\x00-\xfe]")
"""A lacing value below 255 ends a packet (RFC 3533 section 5)."""
_END_OF_STREAM = 0x04
"""Header type flag of the last page of a logical stream (RFC 3533 section 6)."""


class OggCheck(NamedTuple):
    """What :func:`check_ogg` found.

    ``damage``: what is wrong with the pages ("" when they are whole). ``claimed_s``: the sound
    the pages claim, in seconds (granule positions less the pre-skip and any late start), only
    when their headers are plausible; None when not Opus, unknown or implausible.
    ``implausible``: why the granule positions are not believed ("" when they are, or when there
    is nothing to check), naming the page's offset and the rule it breaks, without the header's
    numbers. ``is_whole``: False when the walk stopped once the pages claimed ``max_seconds``
    (:func:`check_ogg`): ``claimed_s`` is then what they claim so far, and damage past it is not
    looked for.
    """

    damage: str
    claimed_s: float | None
    implausible: str
    is_whole: bool = True


def opus_packet_samples(packet: bytes) -> int | None:
    """Samples at 48 kHz in the Opus packet that begins with ``packet`` (its first two bytes
    suffice): frame size from the TOC byte's configuration, times 1 frame (code 0), 2 (codes 1
    and 2) or the frame count byte's M (code 3) (RFC 6716 section 3.1). None for what no decoder
    accepts: an empty packet (RFC 7845 section 3), a code 3 packet without its count byte, with
    M = 0 or over 120 ms."""
    if not packet:
        return None
    toc = packet[0]
    frame = _FRAME_SAMPLES[toc >> 3]
    code = toc & 0x03
    if code == 0:
        return frame
    if code in (1, 2):
        return 2 * frame
    if len(packet) < 2:
        return None
    n_frames = packet[1] & 0x3F
    if n_frames == 0 or n_frames * frame > MAX_PACKET_SAMPLES:
        return None
    return n_frames * frame


class _Granules:
    """Follows one Opus stream's packets and granule positions, page by page (see the module).

    Packets are numbered from 0 (``OpusHead``), 1 (``OpusTags``), then audio. Of each packet
    only its first bytes are kept (the head packet's 19, an audio packet's 2: its TOC and frame
    count)."""

    def __init__(self) -> None:
        self.serial: bytes | None = None
        self.n_packets = 0
        self.head = b""
        self.size = 0  # bytes of the packet being read so far
        self.is_opus: bool | None = None
        self.pre_skip: int | None = None
        self.start = 0  # the granule position before the first sample (RFC 7845 section 4.5)
        self.last: int | None = None  # granule of the most recent page with completed audio
        self.implausible = ""

    def page(self, offset: int, header: bytes, table: bytes, body: bytes) -> None:
        """One page (``header``: its 27 bytes) with its whole segment ``table`` and its ``body``
        (shorter than the table says on a cut page: a packet whose TOC is missing has unknown
        samples, and only bounds apply to the page's granule position)."""
        if self.implausible or self.is_opus is False:
            return
        serial = header[14:18]
        if self.serial is None:
            self.serial = serial
        elif serial != self.serial:
            self.implausible = f"a second logical stream starts at offset {offset}"
            return
        granule = int.from_bytes(header[6:14], "little", signed=True)
        is_eos = bool(header[5] & _END_OF_STREAM)
        samples, n_audio, last_samples, is_known = 0, 0, 0, True
        segment = at = 0
        # one step per packet that completes here (a lacing value below 255), never per segment:
        # a page of 255 one-byte packets costs 255 steps, a page of continued packet data one
        for end in (m.start() for m in _PACKET_END.finditer(table)):
            at = self._read(body, at, sum(table[segment:end + 1]))
            segment = end + 1
            if self.n_packets == 0:
                self.is_opus = self.head[:8] == b"OpusHead" and len(self.head) >= 12
                if not self.is_opus:
                    return
                self.pre_skip = int.from_bytes(self.head[10:12], "little")
            elif self.n_packets >= 2:
                n_audio += 1
                if len(self.head) < min(2, self.size):  # cut before its TOC: samples unknown
                    is_known = False
                elif (last_samples := opus_packet_samples(self.head)) is None:
                    self.implausible = (f"an invalid Opus packet completes on the page at "
                                        f"offset {offset} (RFC 6716 3.1)")
                    return
                else:
                    samples += last_samples
            self.n_packets += 1
            self.head, self.size = b"", 0
        self._read(body, at, sum(table[segment:]))  # a packet that goes on in the next page
        if n_audio:
            self._check(offset, granule, samples, n_audio, last_samples, is_eos, is_known)

    def _read(self, body: bytes, at: int, length: int) -> int:
        """``length`` more bytes of the current packet from ``body[at:]`` (kept: its first
        bytes only); returns where the next packet starts."""
        keep = (19 if self.n_packets == 0 else 2) - len(self.head)
        if keep > 0:
            self.head += body[at:at + min(length, keep)]
        self.size += length
        return at + length

    def _check(self, offset: int, granule: int, samples: int, n_audio: int, last_samples: int,
               is_eos: bool, is_known: bool) -> None:
        """The granule position of a page that completes ``n_audio`` audio packets holding
        ``samples`` (all of them when ``is_known``; else only bounds apply). A broken rule is
        kept in :attr:`implausible`, naming the page by its offset and the rule, with none of
        the header's numbers (which are what is not believed)."""
        where = f"the granule position of the page at offset {offset}"
        if granule < 0:
            self.implausible = f"{where} is missing though packets complete on it (RFC 7845 4)"
            return
        if self.last is None:  # the first audio page (RFC 7845 section 4.5)
            if is_known:  # at least its samples (more: a late start), or the pre-skip if last
                if granule < (self.pre_skip if is_eos else samples):
                    self.implausible = f"{where} is below the samples it holds (RFC 7845 4.5)"
                    return
                self.start = max(granule - samples, 0)
            elif granule > n_audio * MAX_PACKET_SAMPLES:  # cut before some TOCs: from sample 0
                self.implausible = (f"{where} is over what its packets can hold at 120 ms each "
                                    "(RFC 6716 3.2.5)")
                return
            self.last = granule
            return
        step = granule - self.last
        if is_known:
            low = samples - last_samples if is_eos else samples  # end trimming: section 4.4
            high = samples
        else:
            low = n_audio * MIN_PACKET_SAMPLES - (MAX_PACKET_SAMPLES if is_eos else 0)
            high = n_audio * MAX_PACKET_SAMPLES
        if not low <= step <= high:
            self.implausible = (f"{where} does not follow from the packets that complete on it "
                                "(RFC 7845 4)")
            return
        self.last = granule

    def claimed_s(self) -> float | None:
        """Seconds the granule positions claim, or None (not Opus, no audio page, implausible)."""
        if self.implausible or not self.is_opus or self.last is None or self.pre_skip is None:
            return None
        return max(self.last - self.start - self.pre_skip, 0) / OPUS_GRANULE_HZ


def check_ogg(data: bytes, max_seconds: float | None = None) -> OggCheck:
    """Walk the Ogg pages of ``data`` without decoding (see the module and :class:`OggCheck`).

    Damage: the last page cut short (a download or upload stopped early: in its 27-byte header,
    or its segment table or body shorter than the table says) or bytes that are not a page where
    one should start. The walk stops at the first damage; the claim is what the pages before it
    (and a cut page's header, within the bounds its packet count allows) say. With
    ``max_seconds`` (the decoder's limit, s), it also stops once the pages plausibly claim that
    much: what lies beyond is never decoded, and the walk's cost stays bounded by it (one step
    per packet, at least 2.5 ms each) whatever the file holds: 20 MB of one-byte packets is
    checked in a fraction of a second, where without a limit its millions of packets take
    seconds (docs/benchmarks.md, "Figures behind the code's constants"). Give the limit for
    anything a user sent.
    """
    pos = 0
    granules = _Granules()

    def found(damage: str, is_whole: bool = True) -> OggCheck:
        return OggCheck(damage, granules.claimed_s(), granules.implausible, is_whole)

    while pos < len(data):
        if data[pos:pos + 4] != b"OggS":
            return found(f"{len(data) - pos} bytes at offset {pos} are not an Ogg page")
        if pos + 27 > len(data):
            return found(f"the last page is cut in its header ({len(data) - pos} of 27+ bytes)")
        n_segments = data[pos + 26]
        table = data[pos + 27:pos + 27 + n_segments]
        size = 27 + n_segments + sum(table)
        is_cut = len(table) < n_segments or pos + size > len(data)
        if len(table) == n_segments:  # a cut table says nothing about the page's packets
            granules.page(pos, data[pos:pos + 27], table, data[pos + 27 + n_segments:pos + size])
        if is_cut:
            return found(f"the last page is cut: {size} bytes from offset {pos}, "
                         f"{len(data) - pos} present")
        pos += size
        claimed_s = granules.claimed_s()
        if max_seconds is not None and claimed_s is not None and claimed_s >= max_seconds \
                and pos < len(data):
            return found("", is_whole=False)
    return found("")
