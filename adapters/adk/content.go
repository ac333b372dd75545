package adk

import (
	"encoding/base64"
	"fmt"
	"strings"

	"google.golang.org/genai"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ErrUnsupportedContent is wrapped when a content holds a part the model
// bridge cannot hand an Armature model: inline data or a file that is
// not an image (ADK-Go passes audio, video and documents the same way).
// Its category is provider_unsupported_content_block.
var ErrUnsupportedContent = errcat.Sentinel(errcat.ProviderUnsupportedContentBlock, "adk: unsupported content")

// userContent is a user message as ADK-Go content: its text and images,
// in order. An image URL becomes file data (a data: URL inline data, the
// bytes it carries), an inline image inline data; the block's detail
// becomes the part's media resolution.
func userContent(m llm.Message) (*genai.Content, error) {
	if !m.Content.IsBlocks() {
		return genai.NewContentFromText(m.Text(), genai.RoleUser), nil
	}
	c := &genai.Content{Role: genai.RoleUser}
	for _, b := range m.Content.Blocks() {
		switch b.Type {
		case llm.BlockText:
			c.Parts = append(c.Parts, genai.NewPartFromText(b.Text))
		case llm.BlockImage:
			p, err := imagePart(b)
			if err != nil {
				return nil, err
			}
			c.Parts = append(c.Parts, p)
		}
	}
	return c, nil
}

// imagePart is an image block as a genai part.
func imagePart(b llm.Block) (*genai.Part, error) {
	var p *genai.Part
	switch b.Source.Type {
	case llm.SourceInline:
		data, err := base64.StdEncoding.DecodeString(b.Source.Base64Data)
		if err != nil {
			return nil, errcat.Wrap(errcat.ProviderInvalidRequest, "adk: an inline image's data is not valid base64", err)
		}
		p = &genai.Part{InlineData: &genai.Blob{MIMEType: b.MediaType, Data: data}}
	case llm.SourceURL:
		if mt, data, ok, err := dataURL(b.Source.URL); ok {
			if err != nil {
				return nil, errcat.Wrap(errcat.ProviderInvalidRequest, "adk: an image's data: URL is not base64 data (data:<type>;base64,<data>)", err)
			}
			p = &genai.Part{InlineData: &genai.Blob{MIMEType: mt, Data: data}}
		} else {
			p = &genai.Part{FileData: &genai.FileData{FileURI: b.Source.URL, MIMEType: b.MediaType}}
		}
	default:
		return nil, fmt.Errorf("%w: an image without a source", ErrUnsupportedContent)
	}
	if lvl, ok := resolutions[b.Detail]; ok {
		p.MediaResolution = &genai.PartMediaResolution{Level: lvl}
	}
	return p, nil
}

// resolutions maps an image block's detail to a part's media resolution
// ("" sets none); details maps it back.
var (
	resolutions = map[llm.Detail]genai.PartMediaResolutionLevel{
		llm.DetailAuto: genai.PartMediaResolutionLevelMediaResolutionUnspecified,
		llm.DetailLow:  genai.PartMediaResolutionLevelMediaResolutionLow,
		llm.DetailHigh: genai.PartMediaResolutionLevelMediaResolutionHigh,
	}
	details = map[genai.PartMediaResolutionLevel]llm.Detail{
		genai.PartMediaResolutionLevelMediaResolutionUnspecified: llm.DetailAuto,
		genai.PartMediaResolutionLevelMediaResolutionLow:         llm.DetailLow,
		genai.PartMediaResolutionLevelMediaResolutionMedium:      llm.DetailAuto,
		genai.PartMediaResolutionLevelMediaResolutionHigh:        llm.DetailHigh,
		genai.PartMediaResolutionLevelMediaResolutionUltraHigh:   llm.DetailHigh,
	}
)

// dataURL decodes a base64 data: URL (RFC 2397): its media type and
// bytes. ok is false for any other URL.
func dataURL(u string) (mediaType string, data []byte, ok bool, err error) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", nil, false, nil
	}
	meta, payload, found := strings.Cut(rest, ",")
	mediaType, isBase64 := strings.CutSuffix(meta, ";base64")
	if !found || !isBase64 {
		return "", nil, true, fmt.Errorf("not a base64 data: URL")
	}
	data, err = base64.StdEncoding.DecodeString(payload)
	return mediaType, data, true, err
}

// imageBlock is a genai image part (inline data, file data) as an image
// block; ok is false for a part that is neither. Data or a file that is
// not an image fails with ErrUnsupportedContent.
func imageBlock(p *genai.Part) (b llm.Block, ok bool, err error) {
	switch {
	case p.InlineData != nil:
		mt := p.InlineData.MIMEType
		if !strings.HasPrefix(mt, "image/") {
			return b, true, fmt.Errorf("%w: inline data of type %q (the model bridge passes text and images)", ErrUnsupportedContent, mt)
		}
		b = llm.ImageInline(mt, base64.StdEncoding.EncodeToString(p.InlineData.Data))
	case p.FileData != nil:
		mt := p.FileData.MIMEType
		if mt != "" && !strings.HasPrefix(mt, "image/") {
			return b, true, fmt.Errorf("%w: a file of type %q (the model bridge passes text and images)", ErrUnsupportedContent, mt)
		}
		b = llm.ImageURL(p.FileData.FileURI)
		b.MediaType = mt
	default:
		return b, false, nil
	}
	if r := p.MediaResolution; r != nil {
		b.Detail = details[r.Level]
	}
	return b, true, nil
}

// userMessage is the user message of a user content's text and images,
// in order; ok is false when it has neither. A content of text only
// keeps its text as a string.
func userMessage(c *genai.Content) (m llm.Message, ok bool, err error) {
	if !hasMedia(c) {
		text := contentText(c)
		return llm.UserText(text), text != "", nil
	}
	blocks := make([]llm.Block, 0, len(c.Parts))
	for _, p := range c.Parts {
		if p == nil || p.Thought {
			continue
		}
		b, isMedia, err := imageBlock(p)
		switch {
		case err != nil:
			return m, false, err
		case isMedia:
			blocks = append(blocks, b)
		case p.Text != "":
			blocks = append(blocks, llm.TextBlock(p.Text))
		}
	}
	return llm.UserBlocks(blocks...), true, nil
}

// hasMedia reports whether c holds inline data or file data.
func hasMedia(c *genai.Content) bool {
	for _, p := range c.Parts {
		if p != nil && (p.InlineData != nil || p.FileData != nil) {
			return true
		}
	}
	return false
}
