module @jit_gelu_linear attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<256x512xf32>, %arg1: tensor<512x512xf32>, %arg2: tensor<512xf32>) -> (tensor<256x512xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<256x512xf32>, tensor<512x512xf32>) -> tensor<256x512xf32>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<512xf32>) -> tensor<1x512xf32>
    %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1] : (tensor<1x512xf32>) -> tensor<256x512xf32>
    %3 = stablehlo.add %0, %2 : tensor<256x512xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %4 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [0, 1] : (tensor<256x512xf32>, tensor<f32>) -> tensor<f32>
    %cst_0 = stablehlo.constant dense<1.310720e+05> : tensor<f32>
    %5 = stablehlo.divide %4, %cst_0 : tensor<f32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %6 = stablehlo.compare GT, %5, %cst_1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %7 = stablehlo.convert %6 : (tensor<i1>) -> tensor<i32>
    %8 = "stablehlo.case"(%7) ({
      stablehlo.return %3 : tensor<256x512xf32>
    }, {
      %9 = stablehlo.multiply %3, %3 : tensor<256x512xf32>
      %10 = stablehlo.multiply %9, %3 : tensor<256x512xf32>
      %cst_2 = stablehlo.constant dense<4.471500e-02> : tensor<f32>
      %11 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<256x512xf32>
      %12 = stablehlo.multiply %11, %10 : tensor<256x512xf32>
      %13 = stablehlo.add %3, %12 : tensor<256x512xf32>
      %cst_3 = stablehlo.constant dense<0.797884583> : tensor<f32>
      %14 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<256x512xf32>
      %15 = stablehlo.multiply %14, %13 : tensor<256x512xf32>
      %16 = stablehlo.tanh %15 : tensor<256x512xf32>
      %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      %17 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<256x512xf32>
      %18 = stablehlo.add %17, %16 : tensor<256x512xf32>
      %cst_5 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
      %19 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<256x512xf32>
      %20 = stablehlo.multiply %19, %18 : tensor<256x512xf32>
      %21 = stablehlo.multiply %3, %20 : tensor<256x512xf32>
      stablehlo.return %21 : tensor<256x512xf32>
    }) : (tensor<i32>) -> tensor<256x512xf32>
    return %8 : tensor<256x512xf32>
  }
}
