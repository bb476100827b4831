"""The record format: pydantic v2 models for a schemaVersion-2 error record and its envelope.

A record file holds one envelope, ``{"record": {...}, "datasetVersion": "..."}``. The models
refuse unknown fields and coerce nothing (strict mode), so what validates is exactly what a
record file may contain. Field order here is the order of the record files: the canonical JSON
form (:func:`canonical_json`) depends on it.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, ValidationInfo, field_validator, model_serializer, model_validator

SUPPORTED_SCHEMA_VERSIONS = (2,)

#: Upper bounds that keep one hostile record from costing the whole dataset memory or time.
MAX_TEXT = 100_000
MAX_SOURCE = 200_000
MAX_PATTERN = 10_000
MAX_LIST_ITEMS = 200
#: Line numbers must fit the store's INTEGER columns (and any real file); 2**31 - 1 is plenty.
MAX_LINE = 2**31 - 1

_ID = r"^[0-9a-f]{16}$"
_SHA = r"^[0-9a-f]{40}$"
# GitHub's rules: owner is alphanumerics and single hyphens; a repository name adds . and _.
_REPO = r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$"
_SLUG = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
_TAG = r"^[a-z0-9]+(?:[-.+][a-z0-9]+)*$"
_DOTTED_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
_WORD = r"^[a-z]+(?:[-_][a-z]+)*$"
# PEP 508 names and the versions installers record (PEP 440, and local or legacy forms).
_DISTRIBUTION = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"
_VERSION = r"^[A-Za-z0-9][A-Za-z0-9.+!_-]*$"
_UTC_DATETIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z$"
_UTC_DATE_OR_DATETIME = r"^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?Z)?$"

Text = Annotated[str, Field(max_length=MAX_TEXT)]
ListItem = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]
TextList = Annotated[list[ListItem], Field(max_length=MAX_LIST_ITEMS)]
Tag = Annotated[str, Field(pattern=_TAG, max_length=64)]
LineNumber = Annotated[int, Field(ge=1, le=MAX_LINE)]
# NUL cuts text short in C tools (the sqlite3 shell, terminals), and C1 controls (U+0080-U+009F,
# e.g. U+009B, the one-character CSI) are obeyed by some terminals even when JSON output leaves
# them unescaped (json.dumps escapes only U+0000-U+001F). No record text needs either. Other
# control characters (ESC...) are dropped where text is shown (errordb.text.clean) and
# escaped by JSON.
_FORBIDDEN_CHARACTERS = re.compile("[\x00\x80-\x9f]")


class Record(BaseModel):
    """One analysed error: where it is raised, what it means, how to fix it."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    id: str = Field(pattern=_ID, description="16 lowercase hex digits, stable for one raise site.")
    repo: str | None = Field(
        default=None, pattern=_REPO,
        description="GitHub repository as owner/name. Required, except in a draft learned from an installed distribution that names none.",
    )
    distribution: str | None = Field(
        default=None, pattern=_DISTRIBUTION, max_length=200,
        description="The installed distribution a draft was learned from (errordb learn): its name, `python` for the standard library.",
    )
    distributionVersion: str | None = Field(
        default=None, pattern=_VERSION, max_length=100, description="The version of that distribution (of Python for the standard library)."
    )
    slug: str = Field(pattern=_SLUG, max_length=80, description="URL name of the error page.")
    errorCode: Text | None = None
    errorMessage: str = Field(
        max_length=MAX_TEXT, description='The message as raised; "" for a class raised without one (`raise NotImplementedError`).'
    )
    messagePattern: str = Field(
        max_length=MAX_PATTERN,
        description='Regular expression (RE2 syntax, a subset of Python\'s) matching the runtime message; "" matches only the empty message.',
    )
    errorType: Annotated[str, Field(pattern=_WORD, max_length=40)] | None = None
    errorClass: str = Field(pattern=_DOTTED_NAME, max_length=200)
    httpStatus: Annotated[int, Field(ge=100, le=599)] | None = None
    severity: Literal["critical", "error", "warning", "info"]
    filePath: str = Field(min_length=1, max_length=1000, description="Path of the file inside the repo.")
    lineNumber: LineNumber
    functionName: str | None = Field(
        default=None,
        pattern=_DOTTED_NAME,
        max_length=300,
        description="Qualified name of the function that raises (Class.method), when known; left out of the file when not.",
    )
    sourceCode: str = Field(max_length=MAX_SOURCE)
    sourceCodeStart: LineNumber
    sourceCodeEnd: LineNumber
    githubUrl: str | None = Field(
        default=None, max_length=2000, description="The source window pinned to analyzedSha on GitHub. Required, except in a learned draft."
    )
    documentation: Text
    triggerScenarios: Text
    commonSituations: Text
    solutions: TextList
    exampleFix: Text | None = None
    handlingStrategy: Annotated[str, Field(pattern=_WORD, max_length=40)] | None = None
    validationCode: Text | None = None
    typeGuard: Text | None = None
    tryCatchPattern: Text | None = None
    preventionTips: TextList
    tags: Annotated[list[Tag], Field(max_length=MAX_LIST_ITEMS)]
    backgroundTag: str | None = Field(default=None, pattern=_TAG, max_length=64)
    analyzedSha: str | None = Field(
        default=None, pattern=_SHA, description="The commit analysed. Required, except in a learned draft (an installed copy names no commit)."
    )
    analyzedAt: str = Field(pattern=_UTC_DATE_OR_DATETIME, description="UTC date or date-time of the analysis.")
    schemaVersion: int

    @field_validator("schemaVersion", mode="before")
    @classmethod
    def _supported_version(cls, value: Any) -> Any:
        if value not in SUPPORTED_SCHEMA_VERSIONS or isinstance(value, bool):
            supported = ", ".join(map(str, SUPPORTED_SCHEMA_VERSIONS))
            raise ValueError(f"schemaVersion {value!r} is not supported; this errordb reads schemaVersion {supported}")
        return value

    @field_validator("repo")
    @classmethod
    def _repo_name(cls, value: str | None) -> str | None:
        if value is not None and value.split("/")[1] in (".", ".."):
            raise ValueError("repository name must not be '.' or '..'")
        return value

    @field_validator("filePath")
    @classmethod
    def _relative_posix_path(cls, value: str) -> str:
        # The path ends up in URLs and page text, and is compared with traceback paths:
        # it must be a plain relative path inside the repository.
        if "\x00" in value or "\\" in value:
            raise ValueError("must not contain NUL or backslashes")
        parts = value.split("/")
        if value.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ValueError("must be a relative path inside the repository, without '.', '..' or empty parts")
        return value

    @field_validator("githubUrl")
    @classmethod
    def _github_https(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https://github\.com/[^\s<>\"'\\]+", value):  # in full: "$" also matches before a final newline
            raise ValueError("must be an https URL on github.com")
        return value

    @field_validator("messagePattern")
    @classmethod
    def _compiles(cls, value: str, info: ValidationInfo) -> str:
        from errordb.records.patterns import PatternError, validate_pattern

        # A pattern that does not match its own message can never identify the error it
        # documents (ingest would store a record explain never finds). errorMessage is declared
        # first, so it is in info.data when it validated; the pattern is compiled once here
        # (compiling is half the cost of validating a record).
        message = info.data.get("errorMessage")
        try:
            matches = validate_pattern(value, message)
        except PatternError as exc:
            raise ValueError(str(exc)) from None
        if message is not None and not matches:
            raise ValueError("does not fully match errorMessage")
        return value

    @model_validator(mode="after")
    def _no_forbidden_characters(self) -> Record:
        # One search over all the text first: the field-by-field loop below only names the place.
        texts = []
        for value in self.__dict__.values():  # the fields' values (pydantic keeps them there)
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, list):
                texts.extend(value)
        joined = "\n".join(texts)
        # isascii and `in` run at memory speed; the regex costs ~8 ns a character.
        if "\x00" not in joined and (joined.isascii() or not _FORBIDDEN_CHARACTERS.search(joined)):
            return self
        for name in FIELD_NAMES:
            value = getattr(self, name)
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for index, text in items:
                if isinstance(text, str) and (found := _FORBIDDEN_CHARACTERS.search(text)):
                    where = name if index is None else f"{name}[{index}]"
                    raise ValueError(
                        f"{where}: contains control character U+{ord(found.group()):04X} at position {found.start()}; "
                        "record text must not hold NUL or C1 control characters"
                    )
        return self

    @model_validator(mode="after")
    def _source_named(self) -> Record:
        # A harvested or written record points at its source on GitHub; a learned draft at the
        # installed distribution it was read from, whose commit is not known.
        if self.distribution is None:
            for name in ("repo", "githubUrl", "analyzedSha"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name}: Field required (only a draft learned from an installed distribution may leave it out)")
        elif self.distributionVersion is None:
            raise ValueError("distributionVersion: Field required with distribution")
        return self

    @model_serializer(mode="wrap")
    def _without_unknown_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Fields that came after the first records are left out when unknown: those keep their bytes.
        data = handler(self)
        for name in OPTIONAL_FIELDS:
            if data.get(name, "") is None:
                del data[name]
        return data

    @model_validator(mode="after")
    def _line_inside_window(self) -> Record:
        if self.sourceCodeStart > self.sourceCodeEnd:
            raise ValueError("sourceCodeStart: must not be greater than sourceCodeEnd")
        if not self.sourceCodeStart <= self.lineNumber <= self.sourceCodeEnd:
            raise ValueError(
                f"lineNumber: {self.lineNumber} lies outside the snippet "
                f"[{self.sourceCodeStart}, {self.sourceCodeEnd}]"
            )
        return self


class Envelope(BaseModel):
    """What one record file holds: the record and the version of the dataset it belongs to."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    record: Record
    datasetVersion: str = Field(pattern=_UTC_DATETIME, description="ISO-8601 UTC time of the dataset release.")


#: Fields left out of a record file when they are unknown (None).
OPTIONAL_FIELDS = ("repo", "distribution", "distributionVersion", "functionName", "githubUrl", "analyzedSha")
#: Record fields that hold lists, and fields that hold the (nullable) scalars, in file order.
LIST_FIELDS = ("solutions", "preventionTips", "tags")
FIELD_NAMES = tuple(Record.model_fields)
SCALAR_FIELDS = tuple(name for name in FIELD_NAMES if name not in LIST_FIELDS)


def canonical_json(envelope: Envelope) -> str:
    """The envelope as the record files store it: compact JSON, UTF-8, fields in schema order."""
    # pydantic's serialiser writes the same bytes as this json.dumps (checked for every code point
    # by tests/test_ingest_speed.py) at a quarter of the cost; text it refuses (a lone surrogate)
    # takes json.dumps, so it fails, or not, exactly as before.
    from pydantic_core import PydanticSerializationError

    try:
        return envelope.model_dump_json()
    except PydanticSerializationError:
        return json.dumps(envelope.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


def record_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a record file, generated from the models."""
    schema = Envelope.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "errordb record file (schemaVersion 2)"
    return schema
