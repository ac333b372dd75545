package migrate_test

import (
	"fmt"

	"github.com/armature-go/armature/migrate"
)

func Example() {
	reg, err := migrate.NewRegistry(migrate.Session,
		migrate.Migration{From: "v1", To: "v2", Fn: func(s map[string]any) (map[string]any, error) {
			s["locale"] = "en" // v2 added a locale
			return s, nil
		}},
		migrate.Migration{From: "v2", To: "v3", Fn: func(s map[string]any) (map[string]any, error) {
			s["turns"] = s["count"] // v3 renamed count to turns
			delete(s, "count")
			return s, nil
		}},
	)
	if err != nil {
		panic(err)
	}
	state, err := reg.Apply(map[string]any{"count": 4}, "v1", "v3")
	fmt.Println(state, err)
	// Output: map[locale:en turns:4] <nil>
}
