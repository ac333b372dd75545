package eino

import (
	"fmt"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// ErrUnsupportedContent is wrapped when an Eino message holds a part the
// model bridge cannot hand an Armature model: audio, video, a file, or
// an image part without its image. Its category is
// provider_unsupported_content_block.
var ErrUnsupportedContent = errcat.Sentinel(errcat.ProviderUnsupportedContentBlock, "eino: unsupported content")

// userSchema is a user message as Eino's: its text, or, when it holds
// images, its text and images in order as UserInputMultiContent (an
// image URL, data: URLs included, as the part's URL, an inline image as
// its base64 data and MIME type, the detail as the part's).
func userSchema(m llm.Message) *schema.Message {
	if !hasImage(m) {
		return schema.UserMessage(m.Text())
	}
	blocks := m.Content.Blocks()
	parts := make([]schema.MessageInputPart, 0, len(blocks))
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			parts = append(parts, schema.MessageInputPart{Type: schema.ChatMessagePartTypeText, Text: b.Text})
		case llm.BlockImage:
			img := &schema.MessageInputImage{MessagePartCommon: schema.MessagePartCommon{MIMEType: b.MediaType}, Detail: schema.ImageURLDetail(b.Detail)}
			if b.Source.Type == llm.SourceInline {
				data := b.Source.Base64Data
				img.Base64Data = &data
			} else {
				url := b.Source.URL
				img.URL = &url
			}
			parts = append(parts, schema.MessageInputPart{Type: schema.ChatMessagePartTypeImageURL, Image: img})
		}
	}
	return &schema.Message{Role: schema.User, UserInputMultiContent: parts}
}

func hasImage(m llm.Message) bool {
	if !m.Content.IsBlocks() {
		return false
	}
	for _, b := range m.Content.Blocks() {
		if b.Type == llm.BlockImage {
			return true
		}
	}
	return false
}

// userLLM is an Eino user message as Armature's: its text, or its text
// and images in order when it has multimodal parts (UserInputMultiContent,
// or the deprecated MultiContent an older component may still set), its
// Content first when set beside them.
func userLLM(m *schema.Message) (llm.Message, error) {
	legacy := m.MultiContent // deprecated, read for components that still set it
	if len(m.UserInputMultiContent) == 0 && len(legacy) == 0 {
		return llm.UserText(m.Content), nil
	}
	var blocks []llm.Block
	if m.Content != "" {
		blocks = append(blocks, llm.TextBlock(m.Content))
	}
	for _, p := range m.UserInputMultiContent {
		switch {
		case p.Type == schema.ChatMessagePartTypeText:
			if p.Text != "" {
				blocks = append(blocks, llm.TextBlock(p.Text))
			}
		case p.Type == schema.ChatMessagePartTypeImageURL && p.Image != nil && (p.Image.URL != nil || p.Image.Base64Data != nil):
			blocks = append(blocks, imageBlock(p.Image.MessagePartCommon, p.Image.Detail))
		default:
			return llm.Message{}, fmt.Errorf("%w: a user part of type %q (the model bridge passes text and images)", ErrUnsupportedContent, p.Type)
		}
	}
	for _, p := range legacy {
		switch {
		case p.Type == schema.ChatMessagePartTypeText:
			if p.Text != "" {
				blocks = append(blocks, llm.TextBlock(p.Text))
			}
		case p.Type == schema.ChatMessagePartTypeImageURL && p.ImageURL != nil && p.ImageURL.URL != "":
			url := p.ImageURL.URL
			blocks = append(blocks, imageBlock(schema.MessagePartCommon{URL: &url, MIMEType: p.ImageURL.MIMEType}, p.ImageURL.Detail))
		default:
			return llm.Message{}, fmt.Errorf("%w: a user part of type %q (the model bridge passes text and images)", ErrUnsupportedContent, p.Type)
		}
	}
	return llm.UserBlocks(blocks...), nil
}

// imageBlock is an Eino image as an image block: its URL, or its base64
// data when it has no URL.
func imageBlock(c schema.MessagePartCommon, detail schema.ImageURLDetail) llm.Block {
	var b llm.Block
	if c.URL != nil {
		b = llm.ImageURL(*c.URL)
		b.MediaType = c.MIMEType
	} else {
		b = llm.ImageInline(c.MIMEType, *c.Base64Data)
	}
	if d := llm.Detail(detail); d.Valid() {
		b.Detail = d
	}
	return b
}
