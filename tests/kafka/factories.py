"""Small LoCoMo-shaped conversations for the Kafka tests (tests build their own data)."""

from __future__ import annotations

import json
from pathlib import Path

NAMES = [("Ana", "Ben"), ("Caro", "Dev"), ("Eli", "Fay"), ("Gus", "Hana"), ("Ivo", "Jun")]
FACTS = [
    "I love hiking in the mountains.",
    "I am planning a trip to Kyoto next month.",
    "My sister Lena works as a nurse in Berlin.",
    "Yesterday I adopted a cat named Miso.",
    "I prefer green tea over coffee.",
    "Last week I started learning the cello.",
    "I work as a product designer at Acme.",
    "We visited the science museum with the kids on Sunday.",
    "My favourite book is The Left Hand of Darkness.",
    "I moved to Lisbon two years ago.",
    "I am training for a half marathon in October.",
    "My brother Tom is getting married in June.",
]
REPLIES = ["That sounds great!", "Oh nice, tell me more.", "Wow, good for you.", "Interesting!"]
MONTHS = ["January", "February", "March", "April", "May", "June"]


def locomo_sample(k: int, sessions: int = 3, turns: int = 8) -> dict:
    """One LoCoMo sample: two speakers, dated sessions, ``dia_id`` turn ids, an image turn."""
    a, b = NAMES[k % len(NAMES)]
    conv: dict = {"speaker_a": a, "speaker_b": b}
    for s in range(1, sessions + 1):
        conv[f"session_{s}_date_time"] = (
            f"{1 + (k + s) % 11}:{(7 * s) % 60:02d} pm on {1 + s * 3} {MONTHS[(k + s) % 6]}, 2023"
        )
        session = []
        for t in range(1, turns + 1):
            speaker = a if t % 2 else b
            if t % 2:
                text = FACTS[(k * 5 + s * 3 + t) % len(FACTS)]
            else:
                text = REPLIES[(k + s + t) % len(REPLIES)]
            turn = {"speaker": speaker, "dia_id": f"D{s}:{t}", "text": text}
            if t == 4 and s == 1:
                turn.update(
                    img_url=["https://example.org/p.jpg"],
                    blip_caption="a photo of a dog on a beach",
                )
            session.append(turn)
        conv[f"session_{s}"] = session
    return {"sample_id": f"conv-{k}", "conversation": conv, "qa": []}


def write_locomo(path: Path, samples: int = 4, sessions: int = 3, turns: int = 8) -> Path:
    """A LoCoMo JSON file of ``samples`` conversations."""
    path.write_text(json.dumps([locomo_sample(k, sessions, turns) for k in range(samples)]))
    return path
