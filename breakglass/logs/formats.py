"""Peel the wrappers off one logical log line and normalise it for matching.

Formats, detected per line (see shared reference §1.5): klog text and structured klog
(``Lmmdd hh:mm:ss.uuuuuu PID file:line] msg``), JSON logging (``{"ts":…,"msg":…}``),
the CRI wrapper kubelet writes to /var/log/pods (``<RFC3339Nano> stderr F …``, ``P`` for
a partial line), ``talosctl logs`` / ``kubectl logs --prefix`` prefixes, journald
(``short``, ``short-iso``, ``export`` and ``json`` output), audit events, and text pasted
into tickets: ``>`` quoting, doubled, escaped or curly quotes, hard- or soft-wrapped lines.
"""

from __future__ import annotations

import json
import html
import re

from breakglass.logs.jsonarray import TooDeep, loads
from breakglass.logs.record import LogRecord
from breakglass.logs.timestamps import epoch as _epoch, parse_iso  # noqa: F401 - parse_iso is used here too

_MONTHS = {m: i for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)}

# Ticket / mail quoting: "> " or "| " (one space belongs to the quote, the rest is content).
_QUOTE_PREFIX = re.compile(r"^[ \t]*(?:(?:>+|\|) ?)+")
# talosctl prints "<node>: " before each line; kubectl --prefix prints "[pod/<name>/<container>] ".
_NODE_PREFIX = re.compile(
    r"^(?P<node>[\w.\-\[\]:]+?): (?=\d{4}-\d\d-\d\dT|[IWEF]\d{4} |\{)")
_KUBECTL_PREFIX = re.compile(r"^\[(?P<node>pod/[^\]]+)\] ")
_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_CRI = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) "
                  r"(?P<stream>stdout|stderr) (?P<tag>[PF])(?: (?P<msg>.*))?$")
# kubectl logs --timestamps / CloudWatch exports: an RFC 3339 stamp, then the line itself.
_TS_PREFIX = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) (?=[IWEF]\d{4} |\{)")
# A syslog host is a node's host name, which Kubernetes keeps lowercase (RFC 1123). A capitalised word in its
# place is the start of a sentence behind a bare timestamp (`2026-05-01T10:00:00Z Error creating: …` from kubectl
# logs --timestamps), and its first words are the message, not a host and a program.
_HOST = r"(?P<host>(?![A-Z][a-z]+ )\S+)"
_SYSLOG = re.compile(r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? "
                     + _HOST + r" (?P<ident>[^\s:\[]+)(?:\[\d+\])?: (?P<msg>.*)$")
_SYSLOG_ISO = re.compile(r"^(?P<ts>" + _ISO + r") " + _HOST + r" (?P<ident>[^\s:\[]+)(?:\[\d+\])?: (?P<msg>.*)$")
_KLOG = re.compile(r"(?P<level>[IWEF])(?P<month>\d\d)(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?) +"
                   r"(?P<pid>\d+) (?P<caller>[^\s\]]+)\] ?(?P<msg>.*)$", re.S)
# The same header anywhere in a line's first columns, behind a prefix nothing above recognises
# (`master1 kube-controller-manager: I0405 …`, a syslog line without its timestamp, a test runner's columns).
_KLOG_HEAD = re.compile(r"(?P<level>[IWEF])(?P<month>\d\d)(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d(?:\.\d+)?) +"
                        r"(?P<pid>\d+) (?P<caller>[^\s\]]+)\] ?")
PREFIX_COLUMNS = 400  # how far into a line a klog header may start
# Up to three name-like words before a JSON record: the pod and container stern (and kubetail without brackets)
# prints before each line of a webhook pod's JSON log. A klog header has four words before its message.
_TOOL_PREFIX = re.compile(r'(?:[\w.\-/\[\]@]{1,253}[ \t]+){1,3}(?=\{")')
_JOURNAL_EXPORT = re.compile(r"^(?:MESSAGE|__REALTIME_TIMESTAMP|_HOSTNAME)=")
_CRI_PARTIAL = re.compile(r"^(?:\S+: )?\d{4}-\d\d-\d\dT\S+ (?:stdout|stderr) P(?: |$)")

# A line that begins a new record; anything else after a long line is a wrapped continuation.
RECORD_START = re.compile(
    r"^[\s>|]*(?:[IWEF]\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\{|"
    r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|[\w.\-\[\]:]+: (?:\d{4}-\d\d-\d\dT|[IWEF]\d{4} )|\[pod/|"
    r"Error from server|Error creating|[Ee]rror: |Warning: |MESSAGE=|__)")

WRAP_MIN = 60  # a line shorter than this was not wrapped by a terminal or ticket system

# A Markdown link whose text has no spaces: GitHub turns every host name in a pasted log into one
# (`"[vmagent.example.com](http://vmagent.example.com/)"`); the text is what was pasted.
_MD_LINK = re.compile(r"\[(?P<text>[^\]\s\[]+)\]\((?:https?|mailto):[^)\s]*\)")

_CURLY = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                        "\u00ab": '"', "\u00bb": '"', "\u2018": "'", "\u2019": "'"})


# &quot; and its numeric forms: what a line copied out of an HTML page (a Jira or Zendesk export, a chat archive)
# keeps in place of every double quote, the webhook's name's included
_HTML_QUOTE = re.compile(r"&(?:quot|#34|#x22|apos|#39|#x27|amp|lt|gt);", re.I)


# Spaces a web page or chat client puts in place of a log's own (no-break, thin, figure, ideographic) and the
# invisible marks it adds (zero-width space, a byte-order mark): read as the log wrote them, a space and nothing.
# Folded before anything else reads a record, or a klog header and every phrase with a space in it go unseen.
_ODD_SPACES = {c: " " for c in (0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)}
_ODD_SPACES.update({c: None for c in (0x200B, 0x2060, 0xFEFF)})
_ODD_SPACE_RE = re.compile("[" + "".join(map(chr, _ODD_SPACES)) + "]")


def plain_spaces(text: str) -> str:
    """``text`` with no-break, thin and other typographic spaces as plain spaces, zero-width marks removed."""
    return text.translate(_ODD_SPACES) if _ODD_SPACE_RE.search(text) else text


def normalise(text: str) -> str:
    """Fold the quoting variants copies of log lines pick up into plain double quotes."""
    text = text.translate(_CURLY)
    if "&" in text and _HTML_QUOTE.search(text):  # a ticket or chat export that kept the HTML's entities
        text = html.unescape(text)
    if "](" in text:
        text = _MD_LINK.sub(r"\g<text>", text)
    for _ in range(4):  # \" , \\\" , … : structured klog inside JSON inside a ticket
        if '\\"' not in text:
            break
        text = text.replace('\\\\', '\\').replace('\\"', '"')
    if '""' in text:
        text = text.replace('""', '"')
    return text


def is_cri_partial(line: str) -> bool:
    return bool(_CRI_PARTIAL.match(line))


def starts_record(line: str) -> bool:
    return bool(RECORD_START.match(line))


# What a wrapped continuation may begin with: a lower-case letter or punctuation that cannot start a log line
# (a closing quote, a path, the rest of an address). A line beginning with a capital or a digit starts anew unless
# something else shows the line before it was cut.
_CONT_HEAD = re.compile(r"[a-z\"'/:.,;)\]}_=?&%\\\u201d\u2019]|-(?!\s)")  # `- ` is a list item, not a cut
# Line starts that are records of their own although RECORD_START does not know them: Go's log package
# (`2023/10/18 20:28:36 http: TLS handshake error …`), a bare time (`02:19:14 …`), kubectl's event ages
# (`4m52s   Warning …`), Python's traceback header.
_OWN_START = re.compile(r"\d{4}/\d\d/\d\d[ T]\d\d:\d\d|\d\d:\d\d:\d\d\b|\d+[smhd](?:\d+[smh])?\s|Traceback \(")


# A line's first two words: a wrap continues the text, it does not begin with the words the line above began with.
_LEAD = re.compile(r"[^\s]{1,253}[ \t]+[^\s]{1,253}[ \t]+")


def _unquoted(line: str) -> str:
    return _QUOTE_PREFIX.sub("", line, count=1) if line[:1] in " \t>|" else line


def continues(prev: str, cur: str, before: str | None = None) -> bool:
    """Was ``cur`` (a physical line) cut off ``prev``, the line just above it?

    Only positive evidence joins lines; anything else is a record of its own, so two consecutive records
    the reader does not recognise (a second webhook's error, a webhook pod's own log line) never merge.
    Evidence: a CRI partial line; a klog multi-line value (``key=<``, then tab-indented lines); an indented
    continuation (YAML, kubectl describe, a soft-wrapped ticket); ``prev`` ending in a space, or with a quote
    or bracket still open, or in ``:``/``,``; ``cur`` beginning with a lower-case letter or closing
    punctuation; lines cut at one width (``before``, the line above ``prev``, as long as ``prev``).
    """
    if not cur.strip() or not prev.strip():
        return False
    if _CRI_PARTIAL.match(prev):
        return True
    p, c = _unquoted(prev.rstrip("\r")), _unquoted(cur.rstrip("\r"))
    if not c.strip():
        return False
    if c[:1] in " \t":
        stripped = c.lstrip()
        return c.startswith(" >") or not (RECORD_START.match(stripped) or _OWN_START.match(stripped))
    if RECORD_START.match(c) or _OWN_START.match(c):
        return False
    lead = _LEAD.match(c)
    if lead and p.startswith(lead.group(0)):
        return False  # the same first words as the line above: a tool's prefix on each record (stern), or a table's rows
    if p.endswith((" ", "\t", "=<")):
        return True
    tail = p.rstrip()
    if tail.endswith((":", ",", "(", "[", "{")):
        return True
    if _CONT_HEAD.match(c):
        return True
    norm = p.translate(_CURLY)
    if norm.count('"') % 2 == 1 or norm.count("(") > norm.count(")") or norm.count("[") > norm.count("]"):
        return True
    if before is not None and len(p) >= WRAP_MIN and len(_unquoted(before.rstrip("\r"))) == len(p):
        return True  # hard-wrapped at one width
    return p[-1:].isalnum() and c[:1].isdigit()  # a number cut in two


def split_lines(text: str) -> list[tuple[int, int]]:
    """Group a candidate's physical lines into records: [(first, last)] line indexes, by ``continues``."""
    lines = text.split("\n")
    groups: list[tuple[int, int]] = []
    start = 0
    in_value = False  # inside a klog multi-line value (`key=<` … ` >`): everything belongs to the record
    for i in range(1, len(lines)):
        prev = lines[i - 1]
        if prev.rstrip("\r").endswith("=<"):
            in_value = True
        cur = lines[i]
        if in_value:
            if cur.startswith(" >"):
                in_value = False
            continue
        if not continues(prev, cur, lines[i - 2] if i - 2 >= start else None):
            groups.append((start, i - 1))
            start = i
    groups.append((start, len(lines) - 1))
    return groups


class _Peeled:
    __slots__ = ("msg", "ts", "year_known", "node", "fmt", "partial", "year")

    def __init__(self) -> None:
        self.msg = ""
        self.ts: float | None = None
        self.year_known = False
        self.node: str | None = None
        self.fmt: list[str] = []
        self.partial = False
        self.year: int | None = None

    def stamp(self, fmt: str, iso: str) -> None:
        """Record a wrapper with a full RFC 3339 time: it gives the year klog headers lack."""
        self.fmt.append(fmt)
        self.ts = parse_iso(iso)
        self.year_known = self.ts is not None
        self.year = int(iso[:4])


def _peel_outer(line: str) -> _Peeled:
    """Strip the wrappers that come before the apiserver's own text on one physical line."""
    p = _Peeled()
    s = _QUOTE_PREFIX.sub("", line, count=1).lstrip() if line[:1] in " \t>|" else line
    for _ in range(3):
        m = _NODE_PREFIX.match(s) or _KUBECTL_PREFIX.match(s)
        if m:
            p.node = m["node"]
            s = s[m.end():]
            continue
        m = _CRI.match(s)
        if m:
            p.stamp("cri", m["ts"])
            p.partial = m["tag"] == "P"
            s = m["msg"] or ""
            continue
        m = _TS_PREFIX.match(s)
        if m:
            p.stamp("timestamped", m["ts"])
            s = s[m.end():]
            continue
        m = _SYSLOG.match(s)
        if m and m["mon"] in _MONTHS:
            p.fmt.append("journald")
            p.node = p.node or m["host"]
            s = m["msg"]
            continue
        m = _SYSLOG_ISO.match(s)
        if m:
            p.stamp("journald", m["ts"].replace(" ", "T", 1))
            p.node = p.node or m["host"]
            s = m["msg"]
            continue
        if s.startswith("MESSAGE="):
            p.fmt.append("journald-export")
            s = s[8:]
        break
    p.msg = s
    return p


_JSON_META = frozenset({"ts", "time", "timestamp", "caller", "msg", "message", "v", "level", "severity",
                        "logger", "stream", "hostname"})


def _json_message(obj: dict, rec: dict) -> str:
    """The message of one JSON log object: klog JSON, journald JSON, docker json-file or an audit Event."""
    if obj.get("kind") == "Event" and str(obj.get("apiVersion", "")).startswith("audit.k8s.io"):
        rec["fmt"] = "audit"
        ref = obj.get("objectRef") or {}
        status = obj.get("responseStatus") or {}
        res = ref.get("resource", "")
        if ref.get("apiGroup"):
            res += "." + ref["apiGroup"]
        where = f" namespace={ref['namespace']}" if ref.get("namespace") else ""
        user = (obj.get("user") or {}).get("username", "")
        rec["user"] = user if isinstance(user, str) else ""
        ts = obj.get("stageTimestamp") or obj.get("requestReceivedTimestamp")
        if isinstance(ts, str):
            rec["ts"] = parse_iso(ts)
        # Mutating invocations carry {"configuration":…,"webhook":…}: the one place a log names the configuration.
        notes = "".join(f" {k}={v}" for k, v in (obj.get("annotations") or {}).items()
                        if isinstance(v, str) and "webhook.admission.k8s.io/" in k)
        return (f'audit {obj.get("verb", "")} {res} "{ref.get("name", "")}"{where} user={user} '
                f'code={status.get("code", "")}: {status.get("message", "")}{notes}')
    if "MESSAGE" in obj:
        rec["fmt"] = "journald-json"
        rt = obj.get("__REALTIME_TIMESTAMP")
        if isinstance(rt, str) and rt.isdigit():
            rec["ts"] = int(rt) / 1e6
        rec["node"] = obj.get("_HOSTNAME")
        msg = obj["MESSAGE"]
        return msg if isinstance(msg, str) else ""
    # Cloud log exports: GKE (textPayload), AKS diagnostics (properties.log), CloudWatch (message)
    for outer in ("textPayload", "properties"):
        inner = obj.get(outer)
        if isinstance(inner, dict):
            inner = inner.get("log") or inner.get("message")
        if isinstance(inner, str):
            rec["fmt"] = "cloud-export"
            for key in ("timestamp", "time", "TimeGenerated"):
                if isinstance(obj.get(key), str):
                    rec["ts"] = parse_iso(obj[key].replace("+00:00", "Z"))
                    break
            return inner.rstrip("\n")
    if "log" in obj and isinstance(obj["log"], str):
        rec["fmt"] = "docker-json"
        if isinstance(obj.get("time"), str):
            rec["ts"] = parse_iso(obj["time"])
        return obj["log"].rstrip("\n")
    rec["fmt"] = "json"
    ts = obj.get("ts", obj.get("timestamp", obj.get("time")))
    if isinstance(ts, (int, float)):
        # klog's JSON format writes milliseconds; zap-style loggers write seconds.
        rec["ts"] = ts / 1000.0 if ts > 1e11 else float(ts)
    elif isinstance(ts, str):
        rec["ts"] = parse_iso(ts)
    if isinstance(obj.get("caller"), str):
        rec["caller"] = obj["caller"]
    msg = obj.get("msg", obj.get("message", ""))
    parts = [msg if isinstance(msg, str) else json.dumps(msg)]
    for k, v in obj.items():
        if k in _JSON_META:
            continue
        parts.append(f"{k}={v if isinstance(v, str) else json.dumps(v)}")
    return " ".join(parts)


TOO_DEEP_MESSAGE = "(a JSON record nested too deep to read: skipped)"


_WRAP_GLYPH = ("\\", "\u21a9", "\u23ce")  # `\`, `↩`, `⏎`: a wrap drawn at the right edge


def _join(lines: list[str], widths: list[int]) -> str:
    """Join the physical lines of one record.

    CRI partial lines join without a separator. Ticket wrapping is either hard (every
    line cut at the same width, mid-word) or soft (cut at spaces, which are lost):
    lines as long as the longest are taken as hard-wrapped and joined directly. The widths
    compared are the physical lines' (``widths``), not the pieces': the first piece has its
    wrapper peeled off (a klog header, an event's leading columns), and measured without it, it
    looked shorter than the width every line was cut at, so the first cut got a space in it
    (`Error creati ng`).
    """
    if len(lines) == 1:
        return lines[0]
    if all(x.endswith(_WRAP_GLYPH) for x in lines[:-1]):
        # every cut marked, as Emacs and some consoles draw a wrapped line (`…Failed call\` then `ing webhook`):
        # the mark is the screen's, not the log's, and left in it split the webhook's name
        lines = [x[:-1] for x in lines[:-1]] + lines[-1:]
    widest = max(widths[:-1])
    same_width = len(lines) > 2 and len(set(widths[:-1])) == 1
    # A terminal or a hard-wrapping ticket cuts every line at one width, mid-word, keeping each space; a soft wrap
    # (an e-mail, a ticket's word wrap) cuts at spaces and drops them, so its lines' widths vary. Where cuts show
    # no space on either side, their widths tell which: hard when the widest is shared by two of them, soft when
    # three or more are not. (A cut with a space kept says nothing: both wraps leave those.)
    bare_cuts = [(w, cur) for prev, w, cur in zip(lines, widths, lines[1:])
                 if not prev.endswith((" ", "\t")) and not cur.startswith((" ", "\t"))]
    bare = [w for w, _cur in bare_cuts]
    top = max(bare, default=0)
    hard = len(bare) > 1 and bare.count(top) >= 2
    # Two cuts of different widths may be a terminal's cut and a line that really ended there: soft takes three,
    # or two where the narrower stopped only because its next word would not fit in the wider one's width (what a
    # soft wrap does; measured, letting that outweigh two cuts at one width cost more terminal wraps than it won)
    narrower = [w + 1 + len(cur.split(None, 1)[0]) > top for w, cur in bare_cuts if w < top]
    soft = not hard and (len(bare) > 2 or (len(bare) == 2 and bool(narrower) and all(narrower)))
    out = [lines[0]]
    for prev, width, cur in zip(lines, widths, lines[1:]):
        if prev.endswith((" ", "\t")):
            out.append(cur.lstrip())
        elif cur.startswith((" ", "\t")):
            out.append(" " + cur.strip())
        elif not soft and width >= WRAP_MIN and width == widest and (
                same_width or hard or not prev.endswith((":", ",", ";", "."))):
            out.append(cur)
        elif soft and width == widest and len(prev.rsplit(None, 1)[-1]) + len(cur.split(None, 1)[0]) > widest:
            # a word longer than the width (a URL), which a soft wrap can only break inside: no space was lost there
            out.append(cur)
        else:
            out.append(" " + cur)
    return "".join(out)


def parse_record(text: str, source: str, line: int, end_line: int, year: int) -> LogRecord:
    """Turn the text of one logical record (one or more physical lines) into a LogRecord.

    ``year`` is used for klog headers when no outer wrapper carries a full date.
    """
    physical = text.split("\n")
    pieces: list[str] = []
    first: _Peeled | None = None
    joined_partial = False
    widths: list[int] = []  # each piece's physical line's width, for telling a hard wrap (_join)
    for pl in physical:
        pl = pl.rstrip("\r")
        peeled = _peel_outer(pl)
        if joined_partial and first is not None:  # CRI P line: the rest follows directly
            pieces[-1] += peeled.msg
            widths[-1] += len(pl)
            joined_partial = peeled.partial
            continue
        widths.append(len(pl))
        if first is None:
            first = peeled
            pieces.append(peeled.msg)
        elif peeled.fmt:
            pieces.append(peeled.msg)
        else:  # a wrapped continuation keeps its text, minus ticket quoting
            pieces.append(_QUOTE_PREFIX.sub("", pl, count=1) if pl[:1] in ">|" else pl)
        joined_partial = peeled.partial
    assert first is not None
    body = _join(pieces, widths)

    rec: dict = {"ts": first.ts, "node": first.node, "caller": None, "fmt": "+".join(first.fmt)}
    year_known = first.year_known
    level = None
    stripped = body.lstrip()
    tool = _TOOL_PREFIX.match(stripped) if not stripped.startswith("{") else None
    if tool:  # stern's `pod container {…}`: the JSON is the record, as it is without the prefix
        stripped = stripped[tool.end():]
    if stripped.startswith("{"):
        try:
            obj = loads(stripped)
        except TooDeep:  # an attacker's JSON nested past MAX_DEPTH: not read, and its fmt says so
            obj, body = None, TOO_DEEP_MESSAGE
            rec["fmt"] = "+".join(filter(None, [rec["fmt"], "json-too-deep"]))
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            inner_rec: dict = {}
            body = _json_message(obj, inner_rec)
            if inner_rec.get("ts") is not None:
                rec["ts"], year_known = inner_rec["ts"], True
            rec["caller"] = inner_rec.get("caller")
            rec["user"] = inner_rec.get("user")
            rec["node"] = rec["node"] or inner_rec.get("node")
            rec["fmt"] = "+".join(filter(None, [rec["fmt"], inner_rec.get("fmt")]))
            if obj.get("level") in ("error", "warning", "warn", "info"):
                level = str(obj["level"])[0].upper()
            # journald / docker wrap a klog line inside the JSON: fall through to the klog header
    m = _KLOG.match(body)
    msg = m["msg"] if m else None
    if m is None and "] " in body[:PREFIX_COLUMNS]:
        # Only the header must start in the first columns; the message runs to the record's end (a search
        # bounded at those columns would cut it there, and with it the cause).
        m = _KLOG_HEAD.search(body, 0, PREFIX_COLUMNS + 64)
        if m is not None and m.start() >= PREFIX_COLUMNS:
            m = None
        if m is not None:
            msg = body[m.end():]
    if m:
        level = m["level"]
        rec["caller"] = rec["caller"] or m["caller"]
        if rec["ts"] is None:
            y = first.year or year
            rec["ts"] = _epoch(y, int(m["month"]), int(m["day"]), m["time"])
            year_known = first.year is not None
        rec["fmt"] = "+".join(filter(None, [rec["fmt"], "klog"]))
        body = msg
    return LogRecord(
        source=source, line=line, end_line=end_line, raw=text, message=normalise(body),
        level=level, ts=rec["ts"], year_known=year_known, caller=rec["caller"], node=rec["node"],
        fmt=rec["fmt"] or "text", user=rec.get("user"),
    )
