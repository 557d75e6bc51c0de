// Makes the AVIF fixtures whose pictures are turned by 'irot' and 'imir' boxes: the blocks of
// make-fixtures.py (32 x 24, 4 x 3 flat blocks of 8 x 8), encoded at high quality in 4:4:4 with
// the transform properties set. Our own encoder writes no such boxes.
//
//   cc make-avif-transforms.c $(pkg-config --cflags --libs libavif) -o /tmp/make-avif-transforms
//   /tmp/make-avif-transforms   (from this directory)
//
// The imir value written is the box's bit (ISO/IEC 23008-12:2022, 6.5.12): 0 exchanges top
// and bottom (EXIF orientation 4), 1 left and right (EXIF 2). libavif 0.9.2 to 0.11 call the
// field `mode`, others `axis`.
#include <avif/avif.h>
#include <stdio.h>
#include <string.h>

static int write(const char *name, int irot, int imir) {
    avifRGBImage rgb;
    avifImage *image = avifImageCreate(32, 24, 8, AVIF_PIXEL_FORMAT_YUV444);
    avifRGBImageSetDefaults(&rgb, image);
    rgb.format = AVIF_RGB_FORMAT_RGB;
    avifRGBImageAllocatePixels(&rgb);
    for (int y = 0; y < 24; y++) {
        for (int x = 0; x < 32; x++) {
            uint8_t *pixel = rgb.pixels + y * rgb.rowBytes + x * 3;
            int bx = x / 8, by = y / 8;
            pixel[0] = (uint8_t)(bx * 60 + 20);
            pixel[1] = (uint8_t)(by * 90 + 20);
            pixel[2] = (uint8_t)(200 - bx * 40);
        }
    }
    if (avifImageRGBToYUV(image, &rgb) != AVIF_RESULT_OK) return 1;
    if (irot >= 0) {
        image->transformFlags |= AVIF_TRANSFORM_IROT;
        image->irot.angle = (uint8_t)irot;
    }
    if (imir >= 0) {
        image->transformFlags |= AVIF_TRANSFORM_IMIR;
#if AVIF_VERSION_MAJOR >= 1 || (AVIF_VERSION_MAJOR == 0 && (AVIF_VERSION_MINOR < 9 || (AVIF_VERSION_MINOR == 9 && AVIF_VERSION_PATCH < 2)))
        image->imir.axis = (uint8_t)imir;
#else
        image->imir.mode = (uint8_t)imir;
#endif
    }
    avifEncoder *encoder = avifEncoderCreate();
    encoder->minQuantizer = 0;
    encoder->maxQuantizer = 4;
    avifRWData output = AVIF_DATA_EMPTY;
    avifResult result = avifEncoderWrite(encoder, image, &output);
    if (result != AVIF_RESULT_OK) {
        fprintf(stderr, "%s: %s\n", name, avifResultToString(result));
        return 1;
    }
    FILE *file = fopen(name, "wb");
    fwrite(output.data, 1, output.size, file);
    fclose(file);
    avifRWDataFree(&output);
    avifEncoderDestroy(encoder);
    avifRGBImageFreePixels(&rgb);
    avifImageDestroy(image);
    return 0;
}

int main(void) {
    // Turned 90 degrees anticlockwise; top and bottom exchanged; turned 90 degrees
    // anticlockwise, then left and right exchanged (EXIF orientation 7).
    return write("blocks-irot1.avif", 1, -1) || write("blocks-imir0.avif", -1, 0) ||
           write("blocks-irot1-imir1.avif", 1, 1);
}
