"""Content blocks: what prompts, messages, tool calls and summaries are made of."""

from typing import Annotated, Literal, TypeAlias

from pydantic import Field, Tag

from .base import UNKNOWN_TAG, MediaType, Meta, WireModel, discriminate_on

__all__ = [
    "Annotations",
    "AudioContent",
    "BlobResourceContents",
    "ContentBlock",
    "EmbeddedResource",
    "EmbeddedResourceResource",
    "Icon",
    "IconTheme",
    "ImageContent",
    "ResourceLink",
    "Role",
    "TextContent",
    "TextResourceContents",
    "UnknownContentBlock",
]

Role: TypeAlias = Literal["assistant", "user"] | str
"""Who a piece of content is intended for."""

IconTheme: TypeAlias = Literal["light", "dark"] | str
"""The UI theme an icon is drawn for."""


class Annotations(WireModel):
    """Optional hints about how a content block is meant to be used or shown."""

    audience: list[Role] | None = None
    last_modified: str | None = None
    priority: Annotated[float, Field(ge=0, le=1)] | None = None
    meta: Meta = None


class Icon(WireModel):
    """An icon for a resource link (an image URI plus display hints)."""

    src: str
    mime_type: MediaType | None = None
    sizes: list[str] | None = None
    theme: IconTheme | None = None
    meta: Meta = None


class TextContent(WireModel):
    """Plain text (Markdown allowed). Every Agent must accept it in prompts."""

    type: Literal["text"] = "text"
    text: str
    annotations: Annotations | None = None
    meta: Meta = None


class ImageContent(WireModel):
    """A base64-encoded image; prompts may carry it only with ``session.prompt.image``."""

    type: Literal["image"] = "image"
    data: str
    mime_type: MediaType
    uri: str | None = None
    annotations: Annotations | None = None
    meta: Meta = None


class AudioContent(WireModel):
    """Base64-encoded audio; prompts may carry it only with ``session.prompt.audio``."""

    type: Literal["audio"] = "audio"
    data: str
    mime_type: MediaType
    annotations: Annotations | None = None
    meta: Meta = None


class ResourceLink(WireModel):
    """A reference to a resource by URI, without its contents. Every Agent must accept it."""

    type: Literal["resource_link"] = "resource_link"
    name: str
    uri: str
    title: str | None = None
    description: str | None = None
    icons: list[Icon] | None = None
    mime_type: MediaType | None = None
    size: Annotated[int, Field(ge=0)] | None = None
    annotations: Annotations | None = None
    meta: Meta = None


class TextResourceContents(WireModel):
    """The text contents of an embedded resource."""

    text: str
    uri: str
    mime_type: MediaType | None = None
    meta: Meta = None


class BlobResourceContents(WireModel):
    """The binary (base64) contents of an embedded resource."""

    blob: str
    uri: str
    mime_type: MediaType | None = None
    meta: Meta = None


EmbeddedResourceResource: TypeAlias = TextResourceContents | BlobResourceContents
"""The contents of an embedded resource: text or base64 blob (told apart by their keys)."""


class EmbeddedResource(WireModel):
    """A resource with its contents inline; allowed in prompts with ``session.prompt.embeddedContext``."""

    type: Literal["resource"] = "resource"
    resource: EmbeddedResourceResource
    annotations: Annotations | None = None
    meta: Meta = None


class UnknownContentBlock(WireModel):
    """A content block of a type this SDK does not know (custom ``_x`` or a future one), kept as received."""

    type: str


ContentBlock: TypeAlias = Annotated[
    Annotated[TextContent, Tag("text")]
    | Annotated[ImageContent, Tag("image")]
    | Annotated[AudioContent, Tag("audio")]
    | Annotated[ResourceLink, Tag("resource_link")]
    | Annotated[EmbeddedResource, Tag("resource")]
    | Annotated[UnknownContentBlock, Tag(UNKNOWN_TAG)],
    discriminate_on("type", ("text", "image", "audio", "resource_link", "resource")),
]
"""One piece of content, tagged by ``type``."""
