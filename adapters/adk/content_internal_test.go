package adk

import (
	"encoding/base64"
	"errors"
	"testing"

	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// TestUserContent: a user message's images reach ADK-Go as parts (an
// inline image or a data: URL as inline data, another URL as file
// data, the detail as the media resolution) and come back from the
// model bridge as the same blocks; bad data and media the bridge cannot
// pass fail with their category.
func TestUserContent(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n")
	b64 := base64.StdEncoding.EncodeToString(png)
	for _, c := range []struct {
		name string
		msg  llm.Message
		want llm.Message // from the bridge (the message itself when zero)
		cat  errcat.Category
	}{
		{name: "text", msg: llm.UserText("hi")},
		{name: "text blocks", msg: llm.UserBlocks(llm.TextBlock("a"), llm.TextBlock("b")), want: llm.UserText("ab")},
		{name: "URL image with detail", msg: llm.UserBlocks(llm.TextBlock("what?"), llm.ImageURL("https://example.com/a.png").WithDetail(llm.DetailHigh))},
		{name: "inline image", msg: llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, b64), llm.TextBlock("this"))},
		{name: "auto detail", msg: llm.UserBlocks(llm.ImageInline(llm.MediaTypeJPEG, b64).WithDetail(llm.DetailAuto))},
		{name: "data: URL", msg: llm.UserBlocks(llm.ImageURL("data:image/png;base64," + b64)), want: llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, b64))},
		{name: "bad base64", msg: llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, "%%%")), cat: errcat.ProviderInvalidRequest},
		{name: "bad data: URL", msg: llm.UserBlocks(llm.ImageURL("data:image/png," + b64)), cat: errcat.ProviderInvalidRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			content, err := userContent(c.msg)
			if c.cat != "" {
				if got := errcat.Of(err); got != c.cat {
					t.Fatalf("error %v (%s), want %s", err, got, c.cat)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			back, ok, err := userMessage(content)
			want := c.want
			if want.Role == "" {
				want = c.msg
			}
			if err != nil || !ok || !back.Content.Equal(want.Content) {
				t.Fatalf("back from the bridge: %#v, %v, %v; want %#v", back, ok, err, want)
			}
		})
	}
	for _, p := range []*genai.Part{
		{InlineData: &genai.Blob{MIMEType: "audio/wav", Data: png}},
		{FileData: &genai.FileData{FileURI: "gs://b/doc.pdf", MIMEType: "application/pdf"}},
	} {
		_, _, err := userMessage(&genai.Content{Role: genai.RoleUser, Parts: []*genai.Part{p}})
		if !errors.Is(err, ErrUnsupportedContent) || errcat.Of(err) != errcat.ProviderUnsupportedContentBlock {
			t.Errorf("a part the bridge cannot pass (%+v): %v", p, err)
		}
	}
}

// FuzzUserContent: any user message converts to ADK-Go content and back
// without a panic; when both succeed, the images keep their order and
// count.
func FuzzUserContent(f *testing.F) {
	f.Add("what?", "https://example.com/a.png", "image/png", "iVBORw0KGgo=", uint8(1))
	f.Add("", "data:image/gif;base64,R0lGOD==", "", "", uint8(3))
	f.Add("x", "data:,", "image/webp", "!!", uint8(0))
	f.Fuzz(func(t *testing.T, text, url, mediaType, b64 string, detail uint8) {
		c, err := userContent(adaptertest.ImageMessage(text, url, mediaType, b64, detail))
		if err != nil {
			return
		}
		back, ok, err := userMessage(c)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedContent) {
				t.Fatalf("back from the bridge: %v", err)
			}
			return
		}
		images := 0
		for _, b := range back.Content.Blocks() {
			if b.Type == llm.BlockImage {
				images++
			}
		}
		if !ok || images != 2 {
			t.Fatalf("%d images back from %+v", images, c)
		}
	})
}
