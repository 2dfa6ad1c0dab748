module @jit_gelu_linear attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["d"=2]> {stablehlo.mesh = {axes = [{name = "d", size = 2 : i64}]}}
  func.func public @main(%arg0: tensor<8192x8192xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"d"}]>}, %arg1: tensor<8192x8192xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}, {}]>}, %arg2: tensor<8192xbf16> {sdy.sharding = #sdy.sharding<@mesh, [{}]>}) -> (tensor<8192x8192xbf16> {jax.result_info = "result", sdy.sharding = #sdy.sharding<@mesh, [{"d"}, {}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8192x8192xbf16>, tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<8192xbf16>) -> tensor<1x8192xbf16>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x8192xbf16>) -> tensor<8192x8192xbf16>
    %3 = stablehlo.add %0, %2 : tensor<8192x8192xbf16>
    %4 = stablehlo.multiply %3, %3 : tensor<8192x8192xbf16>
    %5 = stablehlo.multiply %4, %3 : tensor<8192x8192xbf16>
    %cst = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %6 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %7 = stablehlo.multiply %6, %5 : tensor<8192x8192xbf16>
    %8 = stablehlo.add %3, %7 : tensor<8192x8192xbf16>
    %cst_0 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %9 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %10 = stablehlo.multiply %9, %8 : tensor<8192x8192xbf16>
    %11 = stablehlo.tanh %10 : tensor<8192x8192xbf16>
    %cst_1 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %12 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %13 = stablehlo.add %12, %11 : tensor<8192x8192xbf16>
    %cst_2 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %14 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %15 = stablehlo.multiply %14, %13 : tensor<8192x8192xbf16>
    %16 = stablehlo.multiply %3, %15 : tensor<8192x8192xbf16>
    return %16 : tensor<8192x8192xbf16>
  }
}
