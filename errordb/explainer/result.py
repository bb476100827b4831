"""The documented, versioned shape of ``errordb explain --format json`` (version 2).

These models are the contract: :func:`explain_json_schema` publishes them as JSON Schema, and
the tests validate real output against it. The explain code builds plain dicts (no pydantic on
the cold path); only the schema is generated from here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from errordb.explainer.explanation import FORMAT_NAME, FORMAT_VERSION, MAX_FINDINGS  # noqa: F401  (re-exported)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvidenceOut(_Strict):
    kind: Literal["message-full", "message-partial", "message-near", "message-specific", "class-agrees", "class-differs", "frame-file", "frame-function", "frame-line", "frame-source"]
    points: float
    detail: str


class MatchOut(_Strict):
    id: str = Field(description="Record id.")
    slug: str
    score: float = Field(description="Sum of the evidence points; see docs/matching.md.")
    evidence: list[EvidenceOut]
    repo: str | None = Field(description="The record's GitHub repository; None for a learned draft of a distribution that names none.")
    distribution: str | None = Field(None, description="For a draft learned from an installed distribution (errordb learn): its name. Present only then.")
    distributionVersion: str | None = Field(None, description="... and its version. Present only then.")
    readFrom: str | None = Field(None, description="For a draft read on the fly from the file the exception was raised in "
                                 "(it is on this machine, and its line is the one the traceback printed): that file. Present only then.")
    errorClass: str
    errorMessage: str
    filePath: str
    lineNumber: int
    function: str | None
    exception: int = Field(description="Index into `exceptions` of the exception this match is for.")
    tie: bool = Field(description="True when another record has the same best score for that exception.")


class FrameOut(_Strict):
    file: str
    line: int | None
    function: str | None


class RecordRef(_Strict):
    id: str
    slug: str
    score: float
    evidence: list[EvidenceOut]


class ExceptionOut(_Strict):
    index: int
    type: str | None = Field(description="Class as printed, None for a bare message.")
    message: str
    notes: list[str]
    role: Literal["root", "raised-from", "raised-during", "group-member"] = Field(
        description="root: the exception a chain starts from, or one that stands alone; raised-from: raised from "
                    "the one before it (`raise ... from`); raised-during: raised while the one before it was "
                    "handled; group-member: a sub-exception of an exception group.")
    rootCause: bool = Field(description="True for the root cause: the exception a chain starts from, or one that stands alone.")
    groupPath: list[int]
    ranks: list[str] = Field(description="Log sources (TP ranks, workers) that printed this same exception.")
    line: int = Field(description="1-based line of the input where it starts.")
    frames: list[FrameOut]
    matches: list[RecordRef]
    tellApart: str | None = Field(description="When several records match equally, what tells them apart.")


class SimilarOut(_Strict):
    id: str
    slug: str
    errorMessage: str


class ExplainOut(_Strict):
    format: Literal["errordb.explain"]
    version: Literal[2]
    errordbVersion: str
    datasetVersion: str | None
    exceptions: list[ExceptionOut] = Field(description=f"The exceptions found, in input order; at most the first {MAX_FINDINGS:,} (see omittedExceptions).")
    matches: list[MatchOut] = Field(description="Every record matched by the exceptions listed, best first.")
    similar: list[SimilarOut] = Field(description="When nothing matched: records with similar text, not the same error.")
    omittedExceptions: int = Field(
        0,
        ge=0,
        description=f"Exceptions found after the first {MAX_FINDINGS:,}, counted but not matched or listed. Present "
        "only when there are some, so a complete document is valid against the schema as first published.",
    )


def explain_json_schema() -> dict:
    """JSON Schema (draft 2020-12) of ``errordb explain --format json``, version 2."""
    schema = ExplainOut.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "errordb explain output, version 2"
    return schema
