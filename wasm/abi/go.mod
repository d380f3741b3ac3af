module github.com/berthhq/berth/wasm/abi

go 1.26
