"""A deterministic generator of English-like text for the character-level GPT example
(examples/train_gpt.py): short village tales from a small grammar and vocabulary written for
kiln, so the repository needs no downloaded corpus. The same seed gives the same text on every
machine (Python's `random.Random` is reproducible across versions).

    python3 examples/data/tales.py --chars 20000 > tales.txt
"""

import argparse
import random

NAMES = ["Ada", "Bram", "Cora", "Dov", "Elin", "Finn", "Greta", "Hugo", "Ines", "Jory",
         "Kaia", "Lorne", "Mira", "Nils", "Orla", "Pim"]
TRADES = ["miller", "baker", "weaver", "smith", "fisher", "shepherd", "potter", "carpenter",
          "tailor", "farmer"]
ANIMALS = ["fox", "heron", "goat", "crow", "hare", "dog", "owl", "horse", "cat", "badger"]
THINGS = ["lantern", "basket", "kettle", "rope", "letter", "coat", "key", "loaf", "map",
          "bell", "boat", "ladder"]
PLACES = ["the river", "the mill", "the market", "the old bridge", "the forest", "the hill",
          "the harbour", "the church", "the well", "the orchard", "the inn"]
ADJECTIVES = ["old", "small", "grey", "quiet", "heavy", "bright", "wet", "crooked", "warm",
              "broken", "tall", "green"]
TIMES = ["in the morning", "at noon", "before dawn", "after supper", "on market day",
         "when the rain stopped", "late at night", "in the spring"]
MOVES = ["walked", "ran", "rode", "hurried", "wandered", "sailed"]
FINDS = ["found", "lost", "carried", "mended", "sold", "hid", "painted", "bought"]
FEELINGS = ["glad", "tired", "afraid", "curious", "angry", "hungry", "calm"]
SAYS = ["said", "whispered", "shouted", "replied"]
WEATHER = ["the wind rose", "snow began to fall", "the sun came out", "fog covered the fields",
           "a storm broke over the hills"]


class _Tale:
    """One tale: a hero with a trade, a companion animal and an object that recur."""

    def __init__(self, rng):
        self.rng = rng
        self.hero = rng.choice(NAMES)
        self.friend = rng.choice([n for n in NAMES if n != self.hero])
        self.trade = rng.choice(TRADES)
        self.animal = rng.choice(ANIMALS)
        self.thing = rng.choice(THINGS)
        self.pronoun = rng.choice(["he", "she"])

    def pick(self, words):
        return self.rng.choice(words)

    def opening(self):
        return (f"Once there was a {self.pick(ADJECTIVES)} {self.trade} named {self.hero}, "
                f"who lived near {self.pick(PLACES)} with a {self.animal}.")

    def journey(self):
        return (f"{self.pick(TIMES).capitalize()}, {self.hero} {self.pick(MOVES)} to "
                f"{self.pick(PLACES)} and {self.pick(FINDS)} a {self.pick(ADJECTIVES)} "
                f"{self.thing}.")

    def meeting(self):
        return (f"At {self.pick(PLACES)} {self.pronoun} met {self.friend} the "
                f"{self.pick(TRADES)}, who was {self.pick(FEELINGS)}.")

    def speech(self):
        who = self.pick([self.hero, self.friend])
        if self.rng.random() < 0.5:
            return f"\"Have you seen my {self.thing}?\" {who} asked."
        return (f"\"The {self.animal} knows the way to {self.pick(PLACES)},\" {who} "
                f"{self.pick(SAYS)}.")

    def weather(self):
        return f"Then {self.pick(WEATHER)}, and the {self.animal} was {self.pick(FEELINGS)}."

    def ending(self):
        return (f"So {self.hero} went home with the {self.thing}, and the {self.animal} "
                f"slept by the fire.")

    def text(self):
        middle = [self.journey, self.meeting, self.speech, self.weather]
        sentences = [self.opening()]
        for _ in range(self.rng.randint(2, 5)):
            sentences.append(self.rng.choice(middle)())
        sentences.append(self.ending())
        return " ".join(sentences)


def generate(chars, seed=0):
    """At least `chars` characters of tales, one per line, the same for the same seed."""
    rng = random.Random(seed)
    lines, total = [], 0
    while total < chars:
        lines.append(_Tale(rng).text())
        total += len(lines[-1]) + 1
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chars", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(generate(args.chars, args.seed), end="")
