package llm

import "strings"

// contentKind tells the three states of a [Content] apart.
type contentKind uint8

const (
	contentNone   contentKind = iota // absent (JSON null or missing)
	contentText                      // a string, possibly ""
	contentBlocks                    // a block sequence, possibly empty
)

// Content is a message's content (llm-provider §3): absent, a string, or an
// ordered sequence of content blocks (§3.1). The zero value is absent
// content. Build it with [Text] or [Blocks].
//
// The three states are kept apart so that JSON round-trips exactly: absent
// content is omitted, Text("") is "", and Blocks() is []. (Which of them a
// role accepts is [Message.Validate]'s business.)
//
// Content is comparable with [Content.Equal], which go-cmp uses.
type Content struct {
	text   string
	blocks []Block
	kind   contentKind
}

// Text returns text content.
func Text(s string) Content { return Content{text: s, kind: contentText} }

// Blocks returns block-sequence content. The slice is not copied: do not
// modify it afterwards. Blocks() with no arguments is an empty sequence,
// which no role accepts.
func Blocks(blocks ...Block) Content {
	if blocks == nil {
		blocks = []Block{}
	}
	return Content{blocks: blocks, kind: contentBlocks}
}

// IsZero reports whether the content is absent.
func (c Content) IsZero() bool { return c.kind == contentNone }

// IsText reports whether the content is a string (possibly "").
func (c Content) IsText() bool { return c.kind == contentText }

// IsBlocks reports whether the content is a block sequence (possibly
// empty).
func (c Content) IsBlocks() bool { return c.kind == contentBlocks }

// IsEmpty reports whether the content is absent, "" or an empty block
// sequence.
func (c Content) IsEmpty() bool {
	switch c.kind {
	case contentText:
		return c.text == ""
	case contentBlocks:
		return len(c.blocks) == 0
	}
	return true
}

// Blocks returns the block sequence, or nil when the content is not a
// block sequence. The slice is shared: do not modify it.
func (c Content) Blocks() []Block {
	if c.kind != contentBlocks {
		return nil
	}
	return c.blocks
}

// Text returns the content string, or the text of the text blocks
// concatenated in order (other blocks contribute nothing), or "" when the
// content is absent. It allocates only to join two or more text blocks.
func (c Content) Text() string {
	if c.kind == contentText {
		return c.text
	}
	var first string
	n, size := 0, 0
	for i := range c.blocks {
		if c.blocks[i].Type == BlockText {
			if n == 0 {
				first = c.blocks[i].Text
			}
			n++
			size += len(c.blocks[i].Text)
		}
	}
	if n <= 1 {
		return first
	}
	var sb strings.Builder
	sb.Grow(size)
	for i := range c.blocks {
		if c.blocks[i].Type == BlockText {
			sb.WriteString(c.blocks[i].Text)
		}
	}
	return sb.String()
}

// Equal reports whether c and o are the same content: same state, same
// string or the same blocks in the same order.
func (c Content) Equal(o Content) bool {
	if c.kind != o.kind || c.text != o.text || len(c.blocks) != len(o.blocks) {
		return false
	}
	for i := range c.blocks {
		if c.blocks[i] != o.blocks[i] {
			return false
		}
	}
	return true
}

// BlockType discriminates content blocks (llm-provider §3.1). The
// BlockType constants are wire identifiers from the OpenArmature
// specification; they must not change.
type BlockType string

// The four content block types.
const (
	// BlockText is a text block (§3.1.1): Text, optional Signature.
	BlockText BlockType = "text"
	// BlockImage is an image block (§3.1.2): Source, MediaType, Detail.
	// User messages only.
	BlockImage BlockType = "image"
	// BlockThinking is provider-emitted reasoning (§3.1.4): Text, optional
	// Signature. Assistant messages only.
	BlockThinking BlockType = "thinking"
	// BlockRedactedThinking is redacted reasoning (§3.1.5): Data.
	// Assistant messages only.
	BlockRedactedThinking BlockType = "redacted_thinking"
)

// Valid reports whether t is one of the four spec block types.
func (t BlockType) Valid() bool {
	switch t {
	case BlockText, BlockImage, BlockThinking, BlockRedactedThinking:
		return true
	}
	return false
}

// Block is one content block (llm-provider §3.1): a flat record whose Type
// says which other fields are meaningful. Fields that do not belong to the
// block's type are ignored, and are neither serialized nor decoded.
//
// Build blocks with [TextBlock], [ImageURL], [ImageInline],
// [ThinkingBlock] and [RedactedThinkingBlock]. Block is comparable with ==.
type Block struct {
	// Type is the block type.
	Type BlockType
	// Text is the text of a text or thinking block; it must be non-empty.
	Text string
	// Signature is the optional provider-issued reasoning-continuity
	// token of a text or thinking block (§3.1.7). Preserve it verbatim;
	// never construct or modify it.
	Signature string
	// Source is where an image block's image comes from; its zero value
	// means no source.
	Source ImageSource
	// MediaType is an image block's IANA media type, required for an
	// inline source (see [MediaTypePNG]).
	MediaType string
	// Detail is an image block's optional fidelity hint; "" omits it (the
	// provider's default, auto, applies).
	Detail Detail
	// Data is a redacted-thinking block's opaque provider blob; pass it
	// through unchanged.
	Data string
}

// TextBlock returns a text block.
func TextBlock(text string) Block { return Block{Type: BlockText, Text: text} }

// ImageURL returns an image block whose source is a URL (http(s), data: or
// another scheme the provider supports), passed to the provider unchanged.
func ImageURL(url string) Block {
	return Block{Type: BlockImage, Source: ImageSource{Type: SourceURL, URL: url}}
}

// ImageInline returns an image block carrying base64-encoded image bytes of
// the given media type (such as [MediaTypePNG]). The data is not inspected
// or re-encoded.
func ImageInline(mediaType, base64Data string) Block {
	return Block{Type: BlockImage, MediaType: mediaType, Source: ImageSource{Type: SourceInline, Base64Data: base64Data}}
}

// ThinkingBlock returns a thinking block. Only provider mappings build
// these: signature must be the provider's token, verbatim, or "".
func ThinkingBlock(text, signature string) Block {
	return Block{Type: BlockThinking, Text: text, Signature: signature}
}

// RedactedThinkingBlock returns a redacted-thinking block carrying the
// provider's opaque data.
func RedactedThinkingBlock(data string) Block {
	return Block{Type: BlockRedactedThinking, Data: data}
}

// WithDetail returns a copy of the image block b with the detail hint d.
func (b Block) WithDetail(d Detail) Block {
	b.Detail = d
	return b
}

// SourceType discriminates image sources (llm-provider §3.1.3). The
// SourceType constants are wire identifiers from the OpenArmature
// specification; they must not change.
type SourceType string

// The two image source variants.
const (
	// SourceURL references the image by URL ([ImageSource.URL]).
	SourceURL SourceType = "url"
	// SourceInline carries base64-encoded bytes ([ImageSource.Base64Data]).
	SourceInline SourceType = "inline"
	// SourceInlineRedacted is the observability placeholder of an inline
	// source (observability §5.5.5, [RedactImages]): it carries only the
	// byte count of the base64 data ([ImageSource.ByteCount]). It is
	// never sent to a provider; validation rejects it.
	SourceInlineRedacted SourceType = "inline_redacted"
)

// ImageSource is an image block's source (llm-provider §3.1.3): exactly one
// of a URL or inline base64 data, as Type says. Its zero value means no
// source.
type ImageSource struct {
	// Type is the source variant.
	Type SourceType
	// URL is the image URL of a url source.
	URL string
	// Base64Data is the base64-encoded image of an inline source.
	Base64Data string
	// ByteCount is the length of the redacted base64 data of an
	// inline_redacted source.
	ByteCount int
}

// IsZero reports whether s is the zero ImageSource (no source).
func (s ImageSource) IsZero() bool { return s == ImageSource{} }

// Detail is an image block's fidelity hint (llm-provider §3.1.2). The
// Detail constants are wire identifiers from the OpenArmature
// specification; they must not change.
type Detail string

// The image detail hints.
const (
	// DetailAuto lets the provider choose the fidelity (the default).
	DetailAuto Detail = "auto"
	// DetailLow asks for low fidelity (fewer tokens).
	DetailLow Detail = "low"
	// DetailHigh asks for high fidelity.
	DetailHigh Detail = "high"
)

// Valid reports whether d is "" (no hint) or one of the spec's hints.
func (d Detail) Valid() bool {
	switch d {
	case "", DetailAuto, DetailLow, DetailHigh:
		return true
	}
	return false
}

// Image media types accepted for inline images (llm-provider §3.1.2).
// The spec guarantees PNG, JPEG and WebP; this package also accepts GIF,
// which the OpenAI and Anthropic mappings carry (a mapping whose provider
// lacks it raises provider_unsupported_content_block). Portable callers
// should stick to the first three. Media types are matched exactly, in
// lower case, without parameters.
const (
	MediaTypePNG  = "image/png"
	MediaTypeJPEG = "image/jpeg"
	MediaTypeWebP = "image/webp"
	MediaTypeGIF  = "image/gif"
)

// SupportedImageMediaType reports whether mediaType is accepted for an
// inline image: one of [MediaTypePNG], [MediaTypeJPEG], [MediaTypeWebP] and
// [MediaTypeGIF].
func SupportedImageMediaType(mediaType string) bool {
	switch mediaType {
	case MediaTypePNG, MediaTypeJPEG, MediaTypeWebP, MediaTypeGIF:
		return true
	}
	return false
}
