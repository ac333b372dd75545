package conformance

import (
	"fmt"
	"strings"
)

// ssConfig is a case's sessions configuration (the sessions fixtures'
// session_store, session_id, session_state, auto_save, seeded_session and
// session_migrations keys, plus the outermost state's schema_version).
type ssConfig struct {
	pos Pos
	// hasStore registers the harness store on the outermost graph
	// (graph.WithSessions); loadRaises is its injected load failure.
	hasStore   bool
	loadRaises string
	// sessionID is the case-level session_id.
	sessionID string
	// fields is the session_state projection (nil: full-state session).
	fields    []string
	hasFields bool
	autoSave  bool
	seeded    *ssSeed
	// migrations are the session_migrations, in declaration order.
	migrations []*ssMigration
}

// ssSeed is a seeded_session: a record saved before the first invocation.
type ssSeed struct {
	pos           Pos
	schemaVersion string
	hasSchema     bool
	state         *Value
}

// ssMigration is one session_migrations entry; fn names a harness mock
// (migrationMocks).
type ssMigration struct {
	pos      Pos
	from, to string
	fn       string
}

// ssExpect holds an invocation's sessions expectations, from its
// expected: block and (invocations: fixtures) the invocation itself.
type ssExpect struct {
	// loaded is loaded_session_state (a null Value: no record).
	loaded *Value
	// loadedInvoke are the loaded_invoke_state_for_<field> entries, keyed
	// by field name.
	loadedInvoke  []*Field
	expectedFinal *Value
	saved         *ssSaved
	storeAfter    *ssStoreAfter
	noLoad        *Value
	noSave        *Value
	untouched     *Value
	noAutoSave    *Value
	innerPre      *Value
	instancePres  *Value
	migrationsRun *Value
}

type ssSaved struct {
	pos           Pos
	state         *Value
	schemaVersion *Value
	excludes      []string
}

type ssStoreAfter struct {
	pos Pos
	// noneFor: load_returns_none_for_session_id; someFor:
	// load_returns_for_session_id with loaded_state /
	// loaded_schema_version.
	noneFor, someFor string
	state            *Value
	schemaVersion    *Value
}

const loadedInvokePrefix = "loaded_invoke_state_for_"

// needsStore lists the expectations that read the harness store.
func (e *ssExpect) needsStore() (string, bool) {
	switch {
	case e.loaded != nil:
		return "loaded_session_state", true
	case e.saved != nil:
		return "saved_session_assertions", true
	case e.storeAfter != nil:
		return "store_after", true
	case e.untouched != nil:
		return "store_untouched", true
	case e.migrationsRun != nil:
		return "migrations_run", true
	}
	return "", false
}

func versionString(v *Value, what string) (string, error) {
	switch v.Kind {
	case KindString:
		return v.Str, nil
	case KindInt, KindFloat:
		return fmt.Sprint(v.Native()), nil
	}
	return "", schemaErrorf(v.Pos, "%s must be a version string, got %s", what, v.Kind)
}

func boolValue(v *Value, what string) error {
	if v.Kind != KindBool {
		return schemaErrorf(v.Pos, "%s must be a bool", what)
	}
	return nil
}

// parseSessionExpect parses one sessions expectation key into exp. inv
// is the invocation for invocation-level keys (nil inside expected:);
// keys that are not sessions expectations are ignored.
func (p *geParser) parseSessionExpect(f *Field, exp *geExpect, inv *geInvocation) error {
	v := f.Value
	key := f.Key
	if inv != nil {
		switch {
		case key == "loaded_session_state", key == "expected_final_state", key == "saved_session_assertions",
			strings.HasPrefix(key, loadedInvokePrefix):
		default:
			return nil
		}
	}
	if exp.ss == nil {
		exp.ss = &ssExpect{}
	}
	e := exp.ss
	twice := func(set bool) error {
		if set {
			return schemaErrorf(f.Pos, "%s given twice (in the invocation and in its expected: block)", key)
		}
		return nil
	}
	switch key {
	case "loaded_session_state":
		if err := twice(e.loaded != nil); err != nil {
			return err
		}
		if !v.IsNull() && v.Kind != KindMap {
			return schemaErrorf(v.Pos, "loaded_session_state must be a mapping or null")
		}
		e.loaded = v
	case "expected_final_state":
		if err := twice(e.expectedFinal != nil); err != nil {
			return err
		}
		if v.Kind != KindMap {
			return schemaErrorf(v.Pos, "expected_final_state must be a mapping")
		}
		e.expectedFinal = v
	case "saved_session_assertions":
		if err := twice(e.saved != nil); err != nil {
			return err
		}
		if err := p.checkKeys(v, key, savedKeys); err != nil {
			return err
		}
		sa := &ssSaved{pos: v.Pos}
		if st, ok := v.Get("state"); ok {
			if st.Kind != KindMap {
				return schemaErrorf(st.Pos, "saved_session_assertions.state must be a mapping")
			}
			sa.state = st
		}
		if sv, ok := v.Get("schema_version"); ok {
			if _, err := versionString(sv, "saved_session_assertions.schema_version"); err != nil {
				return err
			}
			sa.schemaVersion = sv
		}
		if ex, ok := v.Get("excludes_fields"); ok {
			names, err := strList(ex, "excludes_fields")
			if err != nil {
				return err
			}
			sa.excludes = names
		}
		e.saved = sa
	case "store_after":
		if err := p.checkKeys(v, key, storeAfterKeys); err != nil {
			return err
		}
		sa := &ssStoreAfter{pos: v.Pos}
		var err error
		if n, ok := v.Get("load_returns_none_for_session_id"); ok {
			if sa.noneFor, err = str(n, "load_returns_none_for_session_id"); err != nil {
				return err
			}
		}
		if n, ok := v.Get("load_returns_for_session_id"); ok {
			if sa.someFor, err = str(n, "load_returns_for_session_id"); err != nil {
				return err
			}
		}
		if (sa.noneFor == "") == (sa.someFor == "") {
			return schemaErrorf(v.Pos, "store_after needs exactly one of load_returns_none_for_session_id and load_returns_for_session_id")
		}
		if st, ok := v.Get("loaded_state"); ok {
			if st.Kind != KindMap {
				return schemaErrorf(st.Pos, "store_after.loaded_state must be a mapping")
			}
			sa.state = st
		}
		if sv, ok := v.Get("loaded_schema_version"); ok {
			if _, err := versionString(sv, "store_after.loaded_schema_version"); err != nil {
				return err
			}
			sa.schemaVersion = sv
		}
		if sa.noneFor != "" && (sa.state != nil || sa.schemaVersion != nil) {
			return schemaErrorf(v.Pos, "store_after: loaded_state / loaded_schema_version need load_returns_for_session_id")
		}
		e.storeAfter = sa
	case "no_session_load", "no_session_save", "store_untouched", "no_auto_save_on_end":
		if err := boolValue(v, key); err != nil {
			return err
		}
		switch key {
		case "no_session_load":
			e.noLoad = v
		case "no_session_save":
			e.noSave = v
		case "store_untouched":
			e.untouched = v
		default:
			e.noAutoSave = v
		}
	case "inner_pre_state":
		if v.Kind != KindMap {
			return schemaErrorf(v.Pos, "inner_pre_state must be a mapping")
		}
		e.innerPre = v
	case "instance_pre_states":
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "instance_pre_states must be a list of mappings")
		}
		for _, it := range v.Items {
			if it.Kind != KindMap {
				return schemaErrorf(it.Pos, "instance_pre_states entries must be mappings")
			}
		}
		e.instancePres = v
	case "migrations_run":
		if _, err := strList(v, "migrations_run"); err != nil {
			return err
		}
		e.migrationsRun = v
	default:
		field, ok := strings.CutPrefix(key, loadedInvokePrefix)
		if !ok {
			return nil
		}
		for _, lf := range e.loadedInvoke {
			if lf.Key == field {
				return schemaErrorf(f.Pos, "%s given twice", key)
			}
		}
		e.loadedInvoke = append(e.loadedInvoke, &Field{Key: field, Pos: f.Pos, Value: v})
	}
	return nil
}

// parseSessions reads the case-level sessions configuration, resolves
// every invocation's session id and validates the sessions expectations
// against it. gc.sess stays nil for a case that uses no session
// directive, so other suites run exactly as before.
func (p *geParser) parseSessions(body *Value, gc *geCase) error {
	used := gc.outer.schemaVersion != ""
	for _, k := range []string{"session_store", "session_id", "seeded_session", "session_migrations", "session_state", "auto_save"} {
		if _, ok := body.Get(k); ok {
			used = true
		}
	}
	for _, inv := range gc.invocations {
		used = used || inv.sessionID != "" || inv.expect.ss != nil ||
			(inv.expect.expectedError != nil && (inv.expect.expectedError.cause != nil || inv.expect.expectedError.raisedAt != ""))
	}
	for _, n := range gc.outer.nodes {
		for _, st := range n.steps {
			used = used || st.kind == stepSaveSession
		}
	}
	if !used {
		return nil
	}
	cfg := &ssConfig{pos: body.Pos, autoSave: true}
	gc.sess = cfg
	var err error
	if v, ok := body.Get("session_store"); ok {
		if err := p.parseSessionStore(v, cfg); err != nil {
			return err
		}
	}
	storeOnly := func(key string) (*Value, bool, error) {
		v, ok := body.Get(key)
		if ok && !cfg.hasStore {
			return nil, false, schemaErrorf(v.Pos, "%s needs a session_store", key)
		}
		return v, ok, nil
	}
	if v, ok := body.Get("session_id"); ok {
		if cfg.sessionID, err = str(v, "session_id"); err != nil {
			return err
		}
	}
	if v, ok, err := storeOnly("session_state"); err != nil {
		return err
	} else if ok {
		if err := p.checkKeys(v, "session_state", sessionStateKeys); err != nil {
			return err
		}
		fv, ok := v.Get("fields")
		if !ok {
			return schemaErrorf(v.Pos, "session_state needs fields")
		}
		if cfg.fields, err = strList(fv, "session_state.fields"); err != nil {
			return err
		}
		cfg.hasFields = true
	}
	if v, ok, err := storeOnly("auto_save"); err != nil {
		return err
	} else if ok {
		if err := boolValue(v, "auto_save"); err != nil {
			return err
		}
		cfg.autoSave = v.Bool
	}
	if v, ok, err := storeOnly("session_migrations"); err != nil {
		return err
	} else if ok {
		if v.Kind != KindList {
			return schemaErrorf(v.Pos, "session_migrations must be a list")
		}
		for _, it := range v.Items {
			if err := p.checkKeys(it, "session migration", migrationKeys); err != nil {
				return err
			}
			m := &ssMigration{pos: it.Pos}
			if m.from, err = versionString(mustGetOr(it, "from_version"), "from_version"); err != nil {
				return err
			}
			if m.to, err = versionString(mustGetOr(it, "to_version"), "to_version"); err != nil {
				return err
			}
			fn := mustGetOr(it, "migrate")
			if m.fn, err = str(fn, "migrate"); err != nil {
				return err
			}
			if _, known := migrationMocks[m.fn]; !known {
				return &DirectiveUnknownError{Name: m.fn, Pos: fn.Pos}
			}
			cfg.migrations = append(cfg.migrations, m)
		}
	}

	for _, inv := range gc.invocations {
		if inv.sessionID == "" {
			inv.sessionID = cfg.sessionID
		}
		if ee := inv.expect.expectedError; ee != nil && ee.raisedAt != "" {
			x := inv.expect
			switch {
			case !gc.single:
				return schemaErrorf(ee.pos, "raised_at: registration needs a single-invocation case")
			case x.ss != nil || x.finalState != nil || x.executionOrder != nil || x.outcome != nil ||
				x.errorCategory != nil || len(x.invariants) > 0 || len(x.observerEvents) > 0:
				return schemaErrorf(x.pos, "raised_at: registration takes no run-time expectations")
			}
		}
		e := inv.expect.ss
		if e == nil {
			continue
		}
		if key, needs := e.needsStore(); needs && !cfg.hasStore {
			return schemaErrorf(inv.expect.pos, "%s needs a session_store", key)
		}
		if (e.loaded != nil || e.saved != nil) && inv.sessionID == "" {
			return schemaErrorf(inv.expect.pos, "loaded_session_state / saved_session_assertions need a session_id")
		}
		for _, lf := range e.loadedInvoke {
			if gc.outer.field(lf.Key) == nil {
				return schemaErrorf(lf.Pos, "%s%s: no such state field", loadedInvokePrefix, lf.Key)
			}
			if inv.initial != nil {
				if _, supplied := inv.initial.Get(lf.Key); supplied {
					return schemaErrorf(lf.Pos, "%s%s: initial_state supplies %s, so the loaded value is not observable", loadedInvokePrefix, lf.Key, lf.Key)
				}
			}
		}
	}

	if v, ok, err := storeOnly("seeded_session"); err != nil {
		return err
	} else if ok {
		if err := p.checkKeys(v, "seeded_session", seededKeys); err != nil {
			return err
		}
		seed := &ssSeed{pos: v.Pos}
		if sv, ok := v.Get("schema_version"); ok {
			if seed.schemaVersion, err = versionString(sv, "seeded_session.schema_version"); err != nil {
				return err
			}
			seed.hasSchema = true
		}
		st, ok := v.Get("state")
		if !ok || st.Kind != KindMap {
			return schemaErrorf(v.Pos, "seeded_session.state must be a mapping")
		}
		seed.state = st
		if cfg.seedID(gc) == "" {
			return schemaErrorf(v.Pos, "seeded_session needs a session_id to seed under")
		}
		cfg.seeded = seed
	}
	return nil
}

// seedID is the session a seeded_session is saved under: the case-level
// session_id, else the first invocation's.
func (c *ssConfig) seedID(gc *geCase) string {
	if c.sessionID != "" {
		return c.sessionID
	}
	for _, inv := range gc.invocations {
		if inv.sessionID != "" {
			return inv.sessionID
		}
	}
	return ""
}

func (p *geParser) parseSessionStore(v *Value, cfg *ssConfig) error {
	cfg.hasStore = true
	switch v.Kind {
	case KindString:
		if v.Str != "in_memory" {
			return &DirectiveUnknownError{Name: v.Str, Pos: v.Pos}
		}
		return nil
	case KindMap:
	default:
		return schemaErrorf(v.Pos, "session_store must be in_memory or {type, behavior}")
	}
	if err := p.checkKeys(v, "session_store", sessionStoreKeys); err != nil {
		return err
	}
	t, err := str(mustGetOr(v, "type"), "session_store.type")
	if err != nil {
		return err
	}
	if t != "in_memory" {
		tv, _ := v.Get("type")
		return &DirectiveUnknownError{Name: t, Pos: tv.Pos}
	}
	if b, ok := v.Get("behavior"); ok {
		if err := p.checkKeys(b, "session_store.behavior", storeBehaviorKeys); err != nil {
			return err
		}
		if lr, ok := b.Get("load_raises"); ok {
			if cfg.loadRaises, err = str(lr, "load_raises"); err != nil {
				return err
			}
		}
	}
	return nil
}

// mustGetOr returns v's key, or a null Value at v's position when absent
// (so "must be a string" errors point at the mapping).
func mustGetOr(v *Value, key string) *Value {
	if out, ok := v.Get(key); ok {
		return out
	}
	return &Value{Kind: KindNull, Pos: v.Pos}
}
