module @jit_gelu_linear attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @maximal_mesh_0 = <[], device_ids=[0]> {stablehlo.mesh = {axes = [], device_ids = dense<0> : tensor<1xi64>}}
  func.func public @main(%arg0: tensor<8192x8192xbf16>, %arg1: tensor<8192x8192xbf16>, %arg2: tensor<8192xbf16>) -> (tensor<8192x8192xbf16> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8192x8192xbf16>, tensor<8192x8192xbf16>) -> tensor<8192x8192xbf16>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<8192xbf16>) -> tensor<1x8192xbf16>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x8192xbf16>) -> tensor<8192x8192xbf16>
    %3 = stablehlo.add %0, %2 : tensor<8192x8192xbf16>
    %4 = stablehlo.convert %3 : (tensor<8192x8192xbf16>) -> tensor<8192x8192xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.reduce(%4 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<8192x8192xf32>, tensor<f32>) -> tensor<f32>
    %cst_0 = stablehlo.constant dense<0x4C800000> : tensor<f32>
    %6 = stablehlo.divide %5, %cst_0 : tensor<f32>
    %7 = stablehlo.convert %6 : (tensor<f32>) -> tensor<bf16>
    stablehlo.custom_call @xla_ffi_python_gpu_callback(%7) {backend_config = "", has_side_effect = true, mhlo.backend_config = {index = 0 : ui64}, operand_layouts = [dense<> : tensor<0xindex>], result_layouts = [], sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_0, []>]>} : (tensor<bf16>) -> ()
    %8 = stablehlo.multiply %3, %3 : tensor<8192x8192xbf16>
    %9 = stablehlo.multiply %8, %3 : tensor<8192x8192xbf16>
    %cst_1 = stablehlo.constant dense<4.467770e-02> : tensor<bf16>
    %10 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %11 = stablehlo.multiply %10, %9 : tensor<8192x8192xbf16>
    %12 = stablehlo.add %3, %11 : tensor<8192x8192xbf16>
    %cst_2 = stablehlo.constant dense<7.968750e-01> : tensor<bf16>
    %13 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %14 = stablehlo.multiply %13, %12 : tensor<8192x8192xbf16>
    %15 = stablehlo.tanh %14 : tensor<8192x8192xbf16>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<bf16>
    %16 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %17 = stablehlo.add %16, %15 : tensor<8192x8192xbf16>
    %cst_4 = stablehlo.constant dense<5.000000e-01> : tensor<bf16>
    %18 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<bf16>) -> tensor<8192x8192xbf16>
    %19 = stablehlo.multiply %18, %17 : tensor<8192x8192xbf16>
    %20 = stablehlo.multiply %3, %19 : tensor<8192x8192xbf16>
    return %20 : tensor<8192x8192xbf16>
  }
}
