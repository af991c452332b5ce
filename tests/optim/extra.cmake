# volt::optim's schedulers against PyTorch's: schedulers_values prints volt's rates step by step (always built,
# so it compiles against every LibTorch CI uses); schedulers_vs_pytorch.py runs the same cases through
# torch.optim.lr_scheduler and compares. The comparison needs a Python with torch (VOLT_PYTHON, the oracle
# tests' interpreter).
add_executable(volt_schedulers_values ${CMAKE_CURRENT_SOURCE_DIR}/optim/programs/schedulers_values.cpp)
target_link_libraries(volt_schedulers_values PRIVATE ${VOLT_TEST_TARGET})
target_compile_options(volt_schedulers_values PRIVATE ${VOLT_WARNINGS})
target_precompile_headers(volt_schedulers_values REUSE_FROM volt_test_pch)
if(VOLT_PYTHON)
  add_test(NAME volt.optim.schedulers_vs_pytorch
           COMMAND ${VOLT_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/optim/schedulers_vs_pytorch.py
                   --values $<TARGET_FILE:volt_schedulers_values>)
endif()
