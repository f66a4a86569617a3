"""Records: frozen, compared and hashed by their fields, shown without what they mark, replaced field by field."""

from __future__ import annotations

import unittest
from typing import Any

from harness.records import COMPILED_AFTER, FrozenInstanceError, field, fields, record, replace


@record
class Sample:
    """A record with every kind of field."""

    name: str
    secret: str = field(default="", repr=False)
    scratch: Any = field(default=None, compare=False)
    tags: dict[str, str] = field(default_factory=dict)
    count: int = 0


@record(kw_only=True)
class Declared:
    """A record whose fields are given by name only."""

    name: str
    help: str = ""


class Records(unittest.TestCase):
    def test_a_record_is_frozen_compares_and_hashes_by_its_fields_and_has_no_dict(self) -> None:
        one = Sample("a", count=2)
        with self.assertRaises(FrozenInstanceError):
            one.name = "b"  # type: ignore[misc]
        with self.assertRaises(AttributeError):
            del one.count  # type: ignore[misc]
        self.assertEqual(one, Sample("a", count=2, scratch="ignored by =="))
        self.assertNotEqual(one, Sample("a", count=3))
        self.assertEqual(hash(Sample("a", "s", None, (), 1)), hash(Sample("a", "s", "x", (), 1)))
        self.assertFalse(hasattr(one, "__dict__"))
        self.assertEqual(fields(Sample), ("name", "secret", "scratch", "tags", "count"))

    def test_repr_leaves_out_what_is_marked_so_and_each_record_gets_its_own_default(self) -> None:
        shown = repr(Sample("a", secret="sk-do-not-print"))
        self.assertEqual(shown, "Sample(name='a', scratch=None, tags={}, count=0)")
        self.assertIsNot(Sample("a").tags, Sample("b").tags)

    def test_replace_changes_the_fields_given_and_refuses_a_field_there_is_not(self) -> None:
        one = Sample("a", secret="s", count=1)
        self.assertEqual(replace(one, count=2), Sample("a", secret="s", count=2))
        self.assertEqual(one.count, 1)
        with self.assertRaises(TypeError):
            replace(one, colour="red")
        with self.assertRaises(TypeError):
            Sample()  # type: ignore[call-arg]

    def test_a_keyword_only_record_takes_its_fields_by_name_and_refuses_them_by_position(self) -> None:
        self.assertEqual(Declared(help="h", name="n"), Declared(name="n", help="h"))
        self.assertEqual(repr(Declared(name="n")), "Declared(name='n', help='')")
        with self.assertRaises(TypeError):
            Declared("n")  # type: ignore[misc]
        with self.assertRaises(TypeError):
            Declared(name="n", colour="red")  # type: ignore[call-arg]

    def test_a_record_is_made_alike_before_and_after_its_class_compiles_its_init(self) -> None:
        @record
        class Made:
            name: str
            tags: dict[str, str] = field(default_factory=dict)
            count: int = 0

        made = [Made("a", count=2) for _ in range(COMPILED_AFTER + 1)]
        self.assertEqual(made, [Made(name="a", tags={}, count=2)] * len(made))
        self.assertEqual(len({id(one.tags) for one in made}), len(made), "each its own default")
        self.assertEqual(Made.__init__.__qualname__, "Made.__init__", "compiled once it made many")

    def test_arguments_that_do_not_bind_raise_what_python_raises_for_them(self) -> None:
        make: Any = Sample  # called with arguments a type checker refuses
        cases = [
            ((), {}, "Sample.__init__() missing 1 required positional argument: 'name'"),
            (("a",), {"name": "b"}, "Sample.__init__() got multiple values for argument 'name'"),
            (
                ("a", "", None, {}, 0, 1),
                {},
                "Sample.__init__() takes from 2 to 6 positional arguments but 7 were given",
            ),
            (("a",), {"colour": "red"}, "Sample.__init__() got an unexpected keyword argument 'colour'"),
        ]
        for args, kwargs, message in cases:
            with self.subTest(message), self.assertRaises(TypeError) as caught:
                make(*args, **kwargs)
            self.assertEqual(str(caught.exception), message)


if __name__ == "__main__":
    unittest.main()
