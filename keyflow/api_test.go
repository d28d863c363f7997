package keyflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strings"
	"testing"
)

// keyflow's exported API is what a flow's author calls (issue 12): the
// key actor, its messages and the runtime's plumbing live in
// internal/keyactor. A new export fails this test until it is added here
// on purpose.
func TestExportedAPIIsTheUsersOnly(t *testing.T) {
	want := []string{
		"Codec", "Codec.Decode", "Codec.Encode", "Context", "Context.CancelTimer", "Context.Emit", "Context.Key",
		"Context.Logger", "Context.Now", "Context.Partition", "Context.Record", "Context.SetTimer", "Context.Timer", "Context.Topic",
		"DeadLetter", "DeadLetterInfo", "DeadLetterKind", "DeadLetterRecord", "DecodeJSON", "Decoder", "DefaultDeadLetterTopic",
		"DefaultMaxLiveKeys", "DefaultOutputTimeout", "ErrEmitToSnapshotTopic", "ErrInvalidTimerName", "ErrNoOutput", "ErrNoTimerHandler", "ErrOutputTimeout", "ErrPanicked", "ErrUndecodable", "Fail",
		"Flow", "FoldFunc", "Handler", "HeaderErrorException", "HeaderErrorMessage", "HeaderErrorOffset",
		"HeaderErrorOmitted", "HeaderErrorPartition", "HeaderErrorSourceTime", "HeaderErrorTime", "HeaderErrorTopic", "JSON", "KindFoldError", "KindNilKey",
		"KindUndecodable", "KindUndecodableState", "LoadFunc", "New", "NewTyped", "Option", "ParseDeadLetter", "ParsePolicy", "Policy", "Policy.String", "Skip",
		"TimerFunc", "TypedFoldFunc", "WithCodec", "WithDeadLetterTopic", "WithFoldErrorPolicy", "WithMaxIdle", "WithMaxLiveKeys",
		"WithNilKeyPolicy", "WithOnLoad", "WithOutput", "WithOutputTimeout", "WithTimers", "WithUndecodablePolicy", "WithUndecodableStatePolicy",
	}
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range pkgs["keyflow"].Files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					got = append(got, d.Name.Name)
					continue
				}
				recv := d.Recv.List[0].Type
				if s, ok := recv.(*ast.StarExpr); ok {
					recv = s.X
				}
				if ix, ok := recv.(*ast.IndexExpr); ok {
					recv = ix.X
				}
				if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
					got = append(got, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						got = append(got, s.Name.Name)
						if it, ok := s.Type.(*ast.InterfaceType); ok {
							for _, m := range it.Methods.List {
								for _, n := range m.Names {
									if n.IsExported() {
										got = append(got, s.Name.Name+"."+n.Name)
									}
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								got = append(got, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		for _, g := range got {
			if !slices.Contains(want, g) {
				t.Errorf("keyflow exports %s, not in the user API list: move it to internal/keyactor, or add it here", g)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("keyflow no longer exports %s", w)
			}
		}
	}
}
