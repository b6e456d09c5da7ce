package wasmhost

import (
	"context"
	"testing"
)

// TestMappingKept checks that a freed mapping is kept, zeroed, and
// reused, and unmapped once the runtime is closed.
func TestMappingKept(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{})
	a := r.alloc.(*mmapAllocator)
	m, err := r.Compile(ctx, "mem", wasmModule(memorySection(2)))
	if err != nil {
		t.Fatal(err)
	}
	mod, mem, err := m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mod.Memory().WriteByte(5, 1)
	mapped := mem.(*mmapMemory).m
	closeModule(ctx, mod, mem)
	if len(a.free) != 1 || a.free[0] != mapped {
		t.Fatalf("freed mapping not kept: %d kept", len(a.free))
	}
	mod, mem, err = m.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mem.(*mmapMemory).m != mapped || len(a.free) != 0 {
		t.Fatal("kept mapping not reused")
	}
	if b, _ := mod.Memory().ReadByte(5); b != 0 {
		t.Fatal("reused mapping not zeroed")
	}
	closeModule(ctx, mod, mem)
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(a.free) != 0 || !a.closed {
		t.Fatal("kept mappings not released by Close")
	}
}

// TestImage checks that a module's data segments go into an image mapped
// into each instance, and that a mapping reused by another module holds
// nothing of the first one's image or writes.
func TestImage(t *testing.T) {
	ctx := context.Background()
	r := newRuntime(t, Config{})
	a, err := r.Compile(ctx, "a", wasmModule(memorySection(2), dataSection(segment{70000, []byte("data")})))
	if err != nil {
		t.Fatal(err)
	}
	if a.img == nil {
		t.Fatal("no image")
	}
	mod, mem, err := a.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := mem.(*mmapMemory).m.imaged; got != a.img.size {
		t.Fatalf("%d bytes mapped from the image, want %d", got, a.img.size)
	}
	if b, _ := mod.Memory().Read(70000, 4); string(b) != "data" {
		t.Fatalf("memory holds %q, want the data", b)
	}
	mod.Memory().Write(0, []byte("written"))
	mod.Memory().Write(70000, []byte("DATA"))
	closeModule(ctx, mod, mem)
	alloc := r.alloc.(*mmapAllocator)
	if len(alloc.free) != 1 || alloc.free[0].img != a.img {
		t.Fatal("mapping not kept with its image restored")
	}
	// The kept mapping, image restored, serves the next instance of a.
	mod, mem, err = a.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b0, _ := mod.Memory().Read(0, 7); string(b0) != "\x00\x00\x00\x00\x00\x00\x00" {
		t.Fatalf("reused mapping holds %q at 0", b0)
	}
	if b, _ := mod.Memory().Read(70000, 4); string(b) != "data" {
		t.Fatalf("reused mapping holds %q, want the data", b)
	}
	mod.Memory().Write(0, []byte("written"))
	closeModule(ctx, mod, mem)

	// No data: no image, and the reused mapping reads as zeros.
	b, err := r.Compile(ctx, "b", wasmModule(memorySection(2)))
	if err != nil {
		t.Fatal(err)
	}
	mod, mem, err = b.instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeModule(ctx, mod, mem)
	if mem.(*mmapMemory).m.imaged != 0 {
		t.Fatal("image mapped for a module without data")
	}
	got, _ := mod.Memory().Read(0, mod.Memory().Size())
	for i, c := range got {
		if c != 0 {
			t.Fatalf("byte %d of a reused mapping is %#x", i, c)
		}
	}

	// Data past the initial memory: no image, and instantiation fails as
	// without the host's rewriting.
	c, err := r.Compile(ctx, "c", wasmModule(memorySection(1), dataSection(segment{70000, []byte("data")})))
	if err != nil {
		t.Fatal(err)
	}
	if c.img != nil {
		t.Fatal("image for data past the initial memory")
	}
	if _, _, err := c.instantiate(ctx); err == nil {
		t.Fatal("instantiated a module whose data is out of bounds")
	}
}
