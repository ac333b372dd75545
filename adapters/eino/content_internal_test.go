package eino

import (
	"errors"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// TestUserContent: a user message's images reach Eino as multimodal
// parts and come back from the model bridge as the same blocks; the
// deprecated MultiContent is read too, and parts the bridge cannot pass
// fail with ErrUnsupportedContent.
func TestUserContent(t *testing.T) {
	for _, m := range []llm.Message{
		llm.UserText("hi"),
		llm.UserBlocks(llm.TextBlock("what?"), llm.ImageURL("https://example.com/a.png").WithDetail(llm.DetailHigh)),
		llm.UserBlocks(llm.ImageInline(llm.MediaTypePNG, "iVBORw0KGgo="), llm.TextBlock("this")),
		llm.UserBlocks(llm.ImageURL("data:image/gif;base64,R0lGOD==").WithDetail(llm.DetailAuto)),
	} {
		back, err := toLLM(fromLLM(m))
		if err != nil || !back.Content.Equal(m.Content) || back.Role != llm.RoleUser {
			t.Errorf("%#v back from Eino: %#v, %v", m, back, err)
		}
	}
	//lint:ignore SA1019 the deprecated field is read for older components
	img := &schema.ChatMessageImageURL{URL: "https://example.com/b.png", Detail: schema.ImageURLDetailLow}
	//lint:ignore SA1019 likewise
	parts := []schema.ChatMessagePart{{Type: schema.ChatMessagePartTypeImageURL, ImageURL: img}}
	legacy := &schema.Message{Role: schema.User, Content: "look:", MultiContent: parts}
	want := llm.UserBlocks(llm.TextBlock("look:"), llm.ImageURL("https://example.com/b.png").WithDetail(llm.DetailLow))
	if got, err := toLLM(legacy); err != nil || !got.Content.Equal(want.Content) {
		t.Errorf("MultiContent: %#v, %v", got, err)
	}
	for _, p := range []schema.MessageInputPart{
		{Type: schema.ChatMessagePartTypeAudioURL, Audio: &schema.MessageInputAudio{}},
		{Type: schema.ChatMessagePartTypeImageURL},
	} {
		_, err := toLLM(&schema.Message{Role: schema.User, UserInputMultiContent: []schema.MessageInputPart{p}})
		if !errors.Is(err, ErrUnsupportedContent) || errcat.Of(err) != errcat.ProviderUnsupportedContentBlock {
			t.Errorf("a part the bridge cannot pass (%+v): %v", p, err)
		}
	}
}

// FuzzUserContent: any user message of text and images goes to Eino and
// back unchanged.
func FuzzUserContent(f *testing.F) {
	f.Add("what?", "https://example.com/a.png", "image/png", "iVBORw0KGgo=", uint8(1))
	f.Add("", "", "", "", uint8(0))
	f.Fuzz(func(t *testing.T, text, url, mediaType, b64 string, detail uint8) {
		m := adaptertest.ImageMessage(text, url, mediaType, b64, detail)
		back, err := toLLM(fromLLM(m))
		if err != nil || !back.Content.Equal(m.Content) {
			t.Fatalf("%#v back from Eino: %#v, %v", m, back, err)
		}
	})
}
