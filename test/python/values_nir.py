"""A small program for the value and error tests: lists and trees, tuples,
several dtypes, a static shape, a data-dependent allocation, a run-time
broadcast check. Compiled from text by nimble.compile."""

SOURCE = """module @values

type @List = Nil | Cons(tensor<?xf32>, @List)
type @Tree = Leaf(tensor<1x4xf32>) | Node(@Tree, @Tree)

func @id_list(%l: @List) -> @List {
  ret %l
}

func @id_tree(%t: @Tree) -> @Tree {
  ret %t
}

func @map(%l: @List, %k: tensor<f32>) -> @List {
  match %l [Cons: ^cons, _: ^other]
^other:
  ret %l
^cons(%h: tensor<?xf32>, %t: @List):
  %h2 = mul %h, %k
  %t2 = call @map(%t, %k)
  %r = construct @List::Cons(%h2, %t2)
  ret %r
}

// A list of n elements [i] (i = n-1 .. 0): a deep result.
func @count(%n: tensor<i64>) -> @List {
  %zero = constant 0 : tensor<i64>
  %one = constant 1 : tensor<i64>
  %nil = construct @List::Nil()
  br ^loop(%zero, %nil)
^loop(%i: tensor<i64>, %l: @List):
  %done = greater_equal %i, %n
  cond_br %done, ^exit(%l), ^body
^body:
  %f = cast %i, dtype=f32
  %v = reshape %f, shape=[1]
  %l1 = construct @List::Cons(%v, %l)
  %i1 = add %i, %one
  br ^loop(%i1, %l1)
^exit(%r: @List):
  ret %r
}

func @pack(%x: tensor<?x4xf32>) -> tuple<tensor<?x4xf32>, tensor<i64>> {
  %n = dim %x, axis=0
  %t = tuple %x, %n
  ret %t
}

func @unpack(%t: tuple<tensor<?x4xf32>, tensor<i64>>) -> tensor<?xf32> {
  %x = get_tuple %t, index=0
  %n = get_tuple %t, index=1
  %s = sum %x, axes=[1]
  %f = cast %n, dtype=f32
  %r = mul %s, %f
  ret %r
}

func @add(%a: tensor<?x4xf32>, %b: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %r = add %a, %b
  ret %r
}

func @scale(%x: tensor<3x4xf32>, %k: tensor<f32>) -> tensor<3x4xf32> {
  %r = mul %x, %k
  ret %r
}

func @upto(%n: tensor<i64>) -> tensor<?xi64> {
  %zero = constant 0 : tensor<i64>
  %one = constant 1 : tensor<i64>
  %r = arange %zero, %n, %one
  ret %r
}

func @kinds(%a: tensor<?xi32>, %b: tensor<?xf16>, %c: tensor<?xi1>, %d: tensor<?xf64>, %e: tensor<?xi8>) -> (tensor<?xi32>, tensor<?xf16>, tensor<?xi1>, tensor<?xf64>, tensor<?xi8>) {
  %a2 = add %a, %a
  %b2 = add %b, %b
  %c2 = logical_not %c
  %d2 = mul %d, %d
  %e2 = sub %e, %e
  ret %a2, %b2, %c2, %d2, %e2
}

func @wraps(%a: tensor<?xu8>, %b: tensor<?xu16>, %c: tensor<?xu32>, %d: tensor<?xu64>, %e: tensor<?xi16>) -> (tensor<?xu8>, tensor<?xu16>, tensor<?xu32>, tensor<?xu64>, tensor<?xi16>) {
  %a2 = add %a, %a
  %b2 = sub %b, %b
  %c2 = mul %c, %c
  %d2 = neg %d
  %e2 = add %e, %e
  ret %a2, %b2, %c2, %d2, %e2
}

func @weights() -> tensor<4xf32> {
  %w = constant [1.0, 2.0, 3.0, 4.0] : tensor<4xf32>
  ret %w
}
"""
