"""The offline ``rules`` executor: the four primitive memory skills done with text rules.

It is the embedded default: no network, no key, deterministic, and fast enough to run on every
span of a backfill (pure Python regexes, a fraction of a millisecond per turn).

It is honestly weaker than an LLM executor. It understands only the surface patterns in
``classify``, ``person`` and ``dates``; it misses paraphrase, irony, hypotheticals, coreference
across sentences ("she", "it" are left as they are) and most implicit facts; its keys find an
earlier memory only when the same words come back; and its third-person rewriting is grammatical
"enough" rather than fluent ("Caroline went there and Caroline loved it"). What it does do, for
every message of a span:

1. split the message into statements and drop questions and small talk (``statements``);
2. attribute each statement to its speaker in the third person with the speaker's name, and
   ``you`` to the addressee (``person``): "I love hiking" by Caroline -> "Caroline loves hiking.";
3. rewrite relative dates against the message time and set the event time (``dates``);
4. classify it (fact, event, preference, plan, opinion) and key it ``subject|kind|head``
   (``classify``);
5. decide the operation within the memory skills the controller selected (``planner``): INSERT a
   new statement (skill ``insert``); UPDATE the live memory with the same strong key, or the one a
   correction ("actually", "I meant", 其实) points at (``update``); DELETE what an explicit
   cancellation or negation refers to ("I cancelled my trip to Paris", "I'm not vegetarian
   anymore", 取消了, 不再) (``delete``); nothing for small talk (``skip``). Only actions of selected
   skills are produced; an empty selection means all four primitives.

Short answers ("Yes, last week", "Yep, it was amazing") to a question in the previous turn fold the
question into the memory and cite both messages. Image captions in a message's metadata become
"Caroline shared a photo of ..." events. An assistant's message is never stored as the user's
preference: only its suggestions are kept, as facts about the assistant ("The assistant suggested
that the user try ...").

Memory skills with an offline form (``rules.offline``) change this by example: a dropped sentence
(a question, small talk, an assistant's remark) like one of a selected skill's prototypes is kept
as a fact of its speaker ("Caroline asked Melanie: ..."), and a statement like one of its skip
examples is not kept.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillstream.extract import Extraction, ExtractionInput, MemorySkill
from skillstream.lang import detect_language
from skillstream.memskill.seeds import PRIMITIVES
from skillstream.model import Message, Span
from skillstream.rules.classify import Classified, classify, np_head, strip_cue, subject_key
from skillstream.rules.dates import resolve_dates
from skillstream.rules.offline import Matcher, offline_skills
from skillstream.rules.person import add_subject, said, third_person_en, third_person_zh
from skillstream.rules.planner import Planner, Statement
from skillstream.rules.skills import statement_filter
from skillstream.text import (
    CJK,
    content_words,
    is_question,
    is_small_talk,
    leading_answer,
    split_sentences,
    strip_emoji,
    strip_fillers,
)
from skillstream.vocab import MemoryKind

_GENERIC_SPEAKERS = frozenset({"", "user", "human", "me", "customer", "client", "用户"})
_ANAPHORA = re.compile(
    r"^(?:it|that|this|which|they|those|these|she|he)(?:'s|’s|\b)", re.IGNORECASE
)
_QUESTION_LEAD = re.compile(
    r"^(?:did|do|does|are|is|was|were|have|has|will|would|can|could|should)\s+you\s+",
    re.IGNORECASE,
)
_CAPTION_LEAD = re.compile(
    r"^(?:a |an )?(?:photo|picture|image|pic|photograph|screenshot) of\s+", re.IGNORECASE
)


def _speaker_name(m: Message, lang: str) -> str:
    if m.role == "assistant":
        return "助手" if lang == "zh" else "the assistant"
    sp = (m.speaker or "").strip()
    if sp.lower() in _GENERIC_SPEAKERS or sp.lower() == m.role:
        return "用户" if lang == "zh" else "the user"
    return sp


def _addressee(msgs: Sequence[Message], j: int, lang: str) -> str | None:
    me = msgs[j].speaker
    for k in list(range(j - 1, -1, -1)) + list(range(j + 1, len(msgs))):
        if msgs[k].speaker != me and msgs[k].role in ("user", "assistant"):
            return _speaker_name(msgs[k], lang)
    return None


_ZH_END = re.compile(r"[！!~～…]+$")
_SPACE_PUNCT = re.compile(r"\s+([,.;:!?])")
_EN_END = re.compile(r"(?:!+|~+|…+|\.{2,})$")
_INNER_BANG = re.compile(r"!+(?=\s)")


def _finish(text: str, lang: str) -> str:
    """Tidy a memory text: single spaces, a calm full stop at the end, a capital at the start."""
    text = " ".join(text.split())
    if lang == "zh":
        text = _ZH_END.sub("。", text)
        if text[-1:] not in "。？！.?!":
            text += "。"
        return text
    if " ," in text or " ." in text or " !" in text or " ?" in text or " ;" in text or " :" in text:
        text = _SPACE_PUNCT.sub(r"\1", text)
    if text[-1:] in "!~…." and (text[-1:] != "." or text.endswith("..")):
        text = _EN_END.sub(".", text)
    text = text.rstrip(" ,;:-")
    if "!" in text:
        text = _INNER_BANG.sub(".", text)
    if text[-1:] not in ".?!\"”')":
        text += "."
    return text[:1].upper() + text[1:]


def _mentions(text: str, name: str) -> bool:
    return name.lower() in text.lower()


def _allowed(skills: Sequence[MemorySkill]) -> dict[str, str]:
    """Action -> the name of the selected skill that provides it (primitive names preferred)."""
    chosen = list(skills) or list(PRIMITIVES)
    out: dict[str, str] = {}
    for s in chosen:
        action = s.action.upper()
        if action not in out or s.name == action.lower():
            out[action] = s.name
    return out


SAID_SPANS = 4096
"""Spans whose statements an executor keeps for a second run (the pipeline's prediction)."""
MATCHERS = 4
"""Embedding functions an executor keeps the example matching of (``rules.offline.Matcher``)."""


class RulesExecutor:
    """Offline executor implementing the primitive memory skills with text rules.

    Args:
        keep_assistant_suggestions: store an assistant's suggestions as facts about the assistant
            ("The assistant suggested ..."); when false, assistant messages are skipped.
        categories: the bank holds the category skills of ``skillstream.rules.skills``: only the
            statements of selected categories are kept (see ``statement_filter``).
        hemisphere: ``north`` or ``south``: the months a season names (``rules.dates``).
    """

    name = "rules"
    needs_span_vector = False
    reads_retrieved = False
    predictable = True

    def __init__(
        self,
        keep_assistant_suggestions: bool = True,
        categories: bool = False,
        hemisphere: str = "north",
    ) -> None:
        self.keep_assistant_suggestions = keep_assistant_suggestions
        self.categories = categories
        self.hemisphere = hemisphere
        self._said: OrderedDict[int, tuple[Span, tuple, list[Statement], list[_Dropped]]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()
        self._matchers: list[Matcher] = []

    def execute(self, inp: ExtractionInput) -> Extraction:
        allowed = _allowed(inp.memory_skills)
        names = [s.name for s in inp.memory_skills] or [s.name for s in PRIMITIVES]
        planner = Planner(allowed, inp.state)
        msgs = inp.span.messages
        speakers = {m.speaker for m in msgs if m.role in ("user", "assistant")}
        # Names from earlier spans matter only when this span does not show both sides.
        known = inp.state.index.known_people() if len(speakers) < 2 else {}
        keep = statement_filter(inp.memory_skills, self.categories)
        statements, dropped = self._statements_of(inp.span, known)
        by_example = offline_skills(inp.memory_skills)
        if by_example:
            statements = self._by_example(inp, by_example, statements, dropped, keep, known)
            keep = _everything
        for st in statements:
            if keep(st):
                planner.add(st)
        return Extraction(ops=planner.ops(), memory_skills=names)

    def _by_example(
        self,
        inp: ExtractionInput,
        skills: Sequence[MemorySkill],
        statements: list[Statement],
        dropped: list[_Dropped],
        keep: Callable[[Statement], bool],
        known: dict[str, str],
    ) -> list[Statement]:
        """The statements to plan when skills with an offline form are selected (``rules.offline``):
        what ``keep`` keeps unless a skip example drops it, plus the candidates (dropped sentences
        and statements ``keep`` leaves out) a prototype or pattern keeps, in message order."""
        msgs = inp.span.messages
        vocatives = _vocatives(msgs, known)
        candidates = [st for st in statements if not keep(st)]
        candidates += [self._example(msgs, d, vocatives, known) for d in dropped]
        kept = [st for st in statements if keep(st)]
        pool = kept + candidates
        matcher = self._matcher(inp.embed)
        verdicts = matcher.judge(skills, [st.sentence or st.text for st in pool])
        out = [st for st, v in zip(kept, verdicts) if v.skip is None]
        for st, v in zip(candidates, verdicts[len(kept) :]):
            if v.keep is not None:  # a copy: the span's statements are kept for a second run
                reason = f"{st.reason}; kept by memory skill {v.keep}"
                out.append(dataclasses.replace(st, skill=v.keep, reason=reason))
        order = {m.message_id: i for i, m in enumerate(msgs)}
        return sorted(out, key=lambda st: order.get(st.source_ids[-1], 0))

    def _matcher(self, embed: Callable[[Sequence[str]], object] | None) -> Matcher:
        """The matcher (vectors kept) of an embedding function; the last ``MATCHERS`` are kept
        (one executor may serve several pipelines, each with its own ``embedder.encode``, which
        compare equal when they are the same model's)."""
        with self._lock:
            for got in self._matchers:
                if got.embed == embed:
                    return got
            got = Matcher(embed)
            self._matchers = [got, *self._matchers][:MATCHERS]
            return got

    def _example(
        self,
        msgs: Sequence[Message],
        d: _Dropped,
        vocatives: tuple[str, ...],
        known: dict[str, str],
    ) -> Statement:
        """A dropped sentence as a statement of its speaker, quoted (a candidate for examples)."""
        m = msgs[d.index]
        lang = _lang(d.sentence)
        name = _speaker_name(m, lang)
        addressee = _addressee(msgs, d.index, lang)
        if addressee is None:
            others = [n for k, n in known.items() if k != name.lower()]
            addressee = others[0] if len(others) == 1 else None
        words = " ".join(d.sentence.split())
        if lang == "zh":
            verb = "问" if d.why == "question" else "说"
            text = f"{name}{verb}{addressee or ''}：“{words}”"
        else:
            verb = "asked" if d.why == "question" else "said"
            to = f" {addressee}" if addressee and d.why == "question" else ""
            text = f'{_cap(name)} {verb}{to}: "{words}"'
        got = classify(strip_fillers(d.sentence, vocatives) or d.sentence, lang, exclude=vocatives)
        cls = Classified(MemoryKind.FACT, got.head, False, False, False, got.tags)
        subject = "assistant" if m.role == "assistant" else subject_key(name)
        return Statement(
            text,
            cls,
            subject,
            name,
            (m.message_id,),
            m.ts,
            f"{d.why} by {name}",
            origin="example",
            sentence=d.sentence,
        )

    def _statements_of(
        self, span: Span, known: dict[str, str]
    ) -> tuple[list[Statement], list[_Dropped]]:
        """The span's statements, in order, and the sentences it drops (read only by skills with
        an offline form). They depend on the span and the people known before it, not on the
        owner's memories: when the pipeline runs the executor twice for a span (once to predict
        its texts), the second run takes them from the first. Callers do not change them."""
        key = tuple(known.items())
        with self._lock:
            got = self._said.get(id(span))
            if got is not None and got[0] is span and got[1] == key:
                self._said.move_to_end(id(span))
                return got[2], got[3]
        msgs = span.messages
        vocatives = _vocatives(msgs, known)
        dropped: list[_Dropped] = []
        out = [
            st
            for j in range(len(msgs))
            for st in self._statements(msgs, j, vocatives, known, dropped)
        ]
        with self._lock:
            self._said[id(span)] = (span, key, out, dropped)
            while len(self._said) > SAID_SPANS:
                self._said.popitem(last=False)
        return out, dropped

    # ------------------------------------------------------------------------------ statements

    def _statements(
        self,
        msgs: Sequence[Message],
        j: int,
        vocatives: tuple[str, ...],
        known: dict[str, str],
        dropped: list[_Dropped],
    ) -> list[Statement]:
        """Message ``j``'s statements; the sentences it drops are added to ``dropped``."""
        m = msgs[j]
        if m.role not in ("user", "assistant"):
            return []
        lang = _lang(m.text)
        if m.role == "assistant":
            if not self.keep_assistant_suggestions:
                return []
            return self._assistant(msgs, j, lang, dropped)
        name = _speaker_name(m, lang)
        subject = subject_key(name)
        addressee = _addressee(msgs, j, lang)
        if addressee is None:
            others = [n for k, n in known.items() if k != name.lower()]
            addressee = others[0] if len(others) == 1 else None
        out: list[Statement] = []
        kept: list[list[str]] = []  # [clean text, "yes"/"no"/"", "q" when it answers a question]
        question = _previous_question(msgs, j)
        for i, sentence in enumerate(split_sentences(m.text)):
            if is_question(sentence):
                dropped.append(_Dropped(j, sentence, "question"))
                continue
            clean = strip_fillers(sentence, vocatives)
            answer = leading_answer(strip_emoji(sentence)) if i == 0 else None
            short = (
                question is not None
                and i == 0
                and (answer is not None or 0 < _n_words(clean, lang) <= 6)
            )
            if is_small_talk(sentence, vocatives, clean):
                if short and answer is not None:
                    kept.append([clean, answer, "q"])
                elif clean:
                    dropped.append(_Dropped(j, sentence, "small talk"))
                continue
            if kept and kept[-1][2] and not kept[-1][0]:
                kept[-1][0] = clean  # "Yes! I went last week.": the answer is the next sentence
                continue
            if kept and _ANAPHORA.match(clean) and _n_words(clean, lang) <= 8:
                kept[-1][0] = f"{kept[-1][0].rstrip()} {clean}"
                continue
            kept.append([clean, answer or "", "q" if short else ""])
        for clean, answer, is_answer in kept:
            st: Statement | None
            if is_answer and question is not None:
                st = self._answer(
                    m, msgs[j - 1], question, clean, answer, name, subject, lang, vocatives
                )
            else:
                st = self._plain(m, clean, name, subject, addressee, lang, vocatives)
            if st is not None:
                out.append(st)
        photo = _caption(m)
        if photo:
            out.append(self._photo(m, photo, name, subject, vocatives))
        return out

    def _attribute(self, text: str, name: str, addressee: str | None, lang: str) -> str:
        if lang == "zh":
            return third_person_zh(text, name, addressee)
        return third_person_en(add_subject(text, name) or text, name, addressee)

    def _plain(
        self,
        m: Message,
        clean: str,
        name: str,
        subject: str,
        addressee: str | None,
        lang: str,
        vocatives: tuple[str, ...],
    ) -> Statement | None:
        if not clean:
            return None
        cls = classify(clean, lang, exclude=vocatives)
        resolved, ts = resolve_dates(strip_cue(clean), m.ts, lang, self.hemisphere)
        text = self._attribute(resolved, name, addressee, lang)
        if not _mentions(text, name):
            text = said(text, name, lang, vocatives)
        return Statement(
            _finish(text, lang),
            cls,
            subject,
            name,
            (m.message_id,),
            ts,
            f"{cls.kind} stated by {name}",
            sentence=clean,
        )

    def _answer(
        self,
        m: Message,
        prev: Message,
        question: str,
        clean: str,
        answer: str,
        name: str,
        subject: str,
        lang: str,
        vocatives: tuple[str, ...],
    ) -> Statement:
        asker = _speaker_name(prev, lang)
        q_clean = strip_fillers(question, vocatives)
        q_resolved, q_ts = resolve_dates(q_clean, prev.ts, lang, self.hemisphere)
        q_text = self._attribute(q_resolved, asker, name, lang).rstrip()
        resolved, ts = resolve_dates(clean, m.ts, lang, self.hemisphere) if clean else ("", None)
        a_text = self._attribute(resolved, name, asker, lang) if resolved else ""
        word = {
            "yes": "是的" if lang == "zh" else "yes",
            "no": "不是" if lang == "zh" else "no",
        }.get(answer, "")
        cls = classify(clean, lang, exclude=vocatives) if clean else Classified(MemoryKind.FACT, "")
        q_cls = classify(_QUESTION_LEAD.sub("", q_clean), lang, exclude=vocatives)
        if not cls.strong and q_cls.head:
            # The question names what the answer is about ("Did you finish the book?" "Yes!").
            cls = Classified(
                cls.kind,
                q_cls.head,
                False,
                cls.negated,
                cls.correction,
                tuple(dict.fromkeys(cls.tags + q_cls.tags))[:8],
            )
        if lang == "zh":
            reply = "，".join(x for x in (word, a_text.rstrip("。")) if x)
            text = f"{asker}问：“{q_text}”{name}回答：{reply}"
        else:
            a_core = a_text
            if a_text and not a_text.startswith(name):
                a_core = a_text[:1].lower() + a_text[1:]
            reply = ", ".join(x for x in (word, a_core) if x)
            text = f'{_cap(asker)} asked "{q_text}" and {name} answered: {reply}'
        return Statement(
            _finish(text, lang),
            cls,
            subject,
            name,
            (prev.message_id, m.message_id),
            ts or q_ts,
            f"answer by {name} to a question by {asker}",
            origin="answer",
            sentence=f"{question} {clean}".strip(),
        )

    def _photo(
        self, m: Message, caption: str, name: str, subject: str, vocatives: tuple[str, ...]
    ) -> Statement:
        core = _CAPTION_LEAD.sub("", caption.strip()).rstrip(".")
        lang = _lang(core)
        if lang == "zh":
            text = f"{name}分享了一张照片：{core}"
        else:
            text = f"{name} shared a photo of {core}"
        head = np_head(core, n=2) if lang == "en" else core[:4]
        cls = classify(core, lang, exclude=vocatives)
        cls = Classified(MemoryKind.EVENT, f"photo {head}".strip(), False, False, False, cls.tags)
        return Statement(
            _finish(text, lang),
            cls,
            subject,
            name,
            (m.message_id,),
            m.ts,
            f"photo shared by {name}",
            origin="photo",
            sentence=caption,
        )

    def _assistant(
        self, msgs: Sequence[Message], j: int, lang: str, dropped: list[_Dropped]
    ) -> list[Statement]:
        m = msgs[j]
        user = _addressee(msgs, j, lang) or ("用户" if lang == "zh" else "the user")
        out = []
        for sentence in split_sentences(m.text):
            clean, ts = resolve_dates(strip_fillers(sentence), m.ts, lang, self.hemisphere)
            got = _suggestion(clean, user, lang)
            if got is None:
                dropped.append(_Dropped(j, sentence, "remark"))
                continue
            resolved, rest = got
            head = np_head(rest, with_pp=True) if lang == "en" else classify(rest, "zh").head
            tags = tuple(content_words(rest)[:6]) if lang == "en" else (head,) if head else ()
            cls = Classified(MemoryKind.FACT, head, False, False, False, tags)
            out.append(
                Statement(
                    _finish(resolved, lang),
                    cls,
                    "assistant",
                    "助手" if lang == "zh" else "the assistant",
                    (m.message_id,),
                    ts,
                    "suggestion by the assistant (not the user's preference)",
                    origin="suggestion",
                    sentence=sentence,
                )
            )
        return out


# ------------------------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class _Dropped:
    """A sentence the rules do not store: of message ``index``, and why (``question``, ``small
    talk``, ``remark``: an assistant's sentence that suggests nothing)."""

    index: int
    sentence: str
    why: str


def _everything(st: Statement) -> bool:
    return True


def _lang(text: str) -> str:
    return "en" if not text or text.isascii() else detect_language(text)


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _n_words(text: str, lang: str) -> int:
    if lang == "zh":
        return len(CJK.findall(text)) // 2 + len(re.findall(r"[A-Za-z]+", text))
    return len(re.findall(r"[A-Za-z0-9']+", text))


def _vocatives(msgs: Sequence[Message], known: dict[str, str]) -> tuple[str, ...]:
    """Lower-case names of the people in the span and in the owner's memories."""
    out: dict[str, None] = {}
    for sp in [(m.speaker or "").strip().lower() for m in msgs] + list(known):
        if sp and sp not in _GENERIC_SPEAKERS:
            out[sp] = None
            out[sp.split()[0]] = None
    return tuple(out)


def _previous_question(msgs: Sequence[Message], j: int) -> str | None:
    if j == 0:
        return None
    prev = msgs[j - 1]
    if prev.speaker == msgs[j].speaker or prev.role not in ("user", "assistant"):
        return None
    questions = [s for s in split_sentences(prev.text) if is_question(s)]
    return questions[-1] if questions else None


def _caption(m: Message) -> str | None:
    if not m.metadata:
        return None
    try:
        meta = json.loads(m.metadata)
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    cap = meta.get("image_caption") or meta.get("blip_caption")
    if isinstance(cap, list):
        cap = "; ".join(str(c) for c in cap if c)
    return str(cap).strip() if cap else None


_SUGGEST_EN = re.compile(
    r"^(?P<modal>(?:maybe |perhaps )?you (?:should|could|might|may|can|ought to)\b)"
    r"|^(?P<rec>i(?: would|'d)? (?:recommend|suggest|advise)(?: that)?|"
    r"my (?:recommendation|suggestion)"
    r" (?:is|would be)(?: to| that)?)\s+"
    r"|^(?P<how>how about|what about|why not|maybe try|you might want to try|consider|try)\s+",
    re.IGNORECASE,
)
_SUGGEST_LEAD = re.compile(
    r"^(?:then|so|also|alternatively|otherwise|in that case|instead),?\s+", re.IGNORECASE
)
_SUGGEST_ZH = re.compile(r"^(?:我)?(?:建议|推荐)(?:你|您)?|(?:你|您)(?:可以|应该|不妨|最好)")


def _suggestion(sentence: str, user: str, lang: str) -> tuple[str, str] | None:
    """``(memory text, the suggested thing)`` when an assistant sentence suggests something."""
    if lang == "zh" or CJK.search(sentence):
        m = _SUGGEST_ZH.search(sentence)
        if not m:
            return None
        rest = sentence[m.end() :].strip("，,。！!？? ")
        return f"助手建议{user}{rest}", rest
    s = _SUGGEST_LEAD.sub("", sentence.replace("’", "'").rstrip("?!. "))
    m = _SUGGEST_EN.match(s)
    if not m:
        return None
    if m.group("modal"):
        rest = third_person_en(s, "the assistant", user)
        return f"The assistant suggested that {rest[:1].lower() + rest[1:]}", s[m.end() :]
    rest = third_person_en(s[m.end() :], "the assistant", user)
    if m.group("rec"):
        return f"The assistant recommended {rest}", rest
    how = m.group("how").lower()
    if how in ("try", "maybe try", "you might want to try"):
        return f"The assistant suggested that {user} try {rest}", rest
    if how == "consider":
        return f"The assistant suggested that {user} consider {rest}", rest
    return f"The assistant suggested {rest}", rest
