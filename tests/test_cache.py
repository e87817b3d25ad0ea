"""The bounded in-process cache."""

from scriptorium.cache import BoundedCache


def test_the_least_recently_used_entry_is_forgotten_first() -> None:
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert cache.get("b") is None and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2


def test_a_cache_sized_by_weight_forgets_the_oldest_until_it_fits() -> None:
    cache: BoundedCache[str, int] = BoundedCache(1000, max_weight=10)
    for n in range(5):
        cache.put(f"k{n}", n, weight=3)  # 15 in all: the oldest go until 10 or less is held
    assert [cache.get(f"k{n}") for n in range(5)] == [None, None, 2, 3, 4]
    assert cache.weight == 9
    cache.put("k2", 2, weight=1)  # a key put again weighs what it weighs now
    assert cache.weight == 7 and len(cache) == 3
    cache.put("big", 0, weight=50)  # one entry heavier than the bound is kept alone, not refused
    assert len(cache) == 1 and cache.get("big") == 0


def test_a_years_topics_are_parsed_once_each_however_many_there_are(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The topic parse memo held 64 parses: with more topics than that every lookup missed. Sized by bytes, a
    second read of 500 topics parses none of them again."""
    from scriptorium.workspace import topics

    topics.clear_memo()
    parses = 0
    parse = topics._parse_topic

    def counted(path: str, text: str) -> topics.ParsedTopic:
        nonlocal parses
        parses += 1
        return parse(path, text)

    monkeypatch.setattr(topics, "_parse_topic", counted)
    texts = {f"topics/t{n}.md": f"# T{n}\n\n2026-11-0{n % 9 + 1}: Fact {n} [k](test/t/m{n}).\n" for n in range(500)}
    for _ in range(2):
        for path, text in texts.items():
            topics.parse_topic(path, text)
    assert parses == 500
